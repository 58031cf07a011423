"""The time buckets of the accounting zone: local days as UTC instants, DST days, refused zones
and the month and day parameters."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core import checks

from apps.common.buckets import (
    CHECKED_YEARS,
    BucketError,
    ZoneError,
    accounting_zone,
    day_end,
    day_of,
    day_start,
    hour_floor,
    hour_floor_sql,
    hour_origin,
    iso_local,
    month_days,
    month_end,
    month_of,
    month_start,
    parse_day,
    parse_month,
    rollup_day_of,
    rollup_day_start,
    utc_buckets,
    zone_problem,
)

SHANGHAI, BERLIN, KOLKATA = ZoneInfo("Asia/Shanghai"), ZoneInfo("Europe/Berlin"), ZoneInfo("Asia/Kolkata")


def _hours(day: date, zone: ZoneInfo) -> float:
    return (day_end(day, zone) - day_start(day, zone)) / timedelta(hours=1)


def test_it_puts_the_last_and_first_local_half_hours_of_a_month_in_their_own_months() -> None:
    late, early = datetime(2026, 11, 30, 15, 30, tzinfo=UTC), datetime(2026, 11, 30, 16, 30, tzinfo=UTC)

    assert (day_of(late, SHANGHAI), month_of(late, SHANGHAI)) == (date(2026, 11, 30), date(2026, 11, 1))
    assert (day_of(early, SHANGHAI), month_of(early, SHANGHAI)) == (date(2026, 12, 1), date(2026, 12, 1))


def test_it_gives_local_day_and_month_edges_as_utc_instants() -> None:
    assert day_start(date(2026, 12, 1), SHANGHAI) == datetime(2026, 11, 30, 16, tzinfo=UTC)
    assert month_start(date(2026, 11, 1), SHANGHAI) == datetime(2026, 10, 31, 16, tzinfo=UTC)
    assert month_end(date(2026, 12, 1), SHANGHAI) == datetime(2026, 12, 31, 16, tzinfo=UTC)
    assert day_start(date(2026, 12, 1), SHANGHAI).tzinfo is UTC


def test_it_gives_dst_days_23_and_25_hours() -> None:
    assert _hours(date(2026, 3, 29), BERLIN) == 23
    assert _hours(date(2026, 10, 25), BERLIN) == 25
    assert _hours(date(2026, 10, 26), BERLIN) == 24
    assert day_start(date(2026, 10, 26), BERLIN) == datetime(2026, 10, 25, 23, tzinfo=UTC)


@pytest.mark.books_in("UTC")
def test_it_floors_to_the_utc_hour_whatever_the_offset() -> None:
    at = datetime(2026, 12, 1, 0, 30, tzinfo=SHANGHAI)

    assert hour_floor(at) == datetime(2026, 11, 30, 16, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "minutes"),
    [
        ("UTC", 0),
        ("Asia/Shanghai", 0),
        ("America/New_York", 0),
        ("Asia/Kolkata", 30),  # +05:30: midnight is 18:30 UTC
        ("Asia/Kathmandu", 15),  # +05:45: midnight is 18:15 UTC
        ("Australia/Adelaide", 30),  # +09:30 and +10:30
        ("America/St_Johns", 30),  # -03:30 and -02:30: midnight is 03:30 or 02:30 UTC
        ("Pacific/Chatham", 15),  # +12:45 and +13:45
    ],
)
def test_it_starts_the_hours_at_the_zones_minutes_past_the_utc_hour(name: str, minutes: int) -> None:
    zone = ZoneInfo(name)

    assert hour_origin(zone) == timedelta(minutes=minutes)
    assert day_start(date(2026, 12, 1), zone).minute == minutes


@pytest.mark.books_in("Asia/Kolkata")
def test_it_floors_to_the_local_hour_in_a_zone_of_half_hours() -> None:
    assert hour_floor(datetime(2026, 11, 30, 18, 29, 59, tzinfo=UTC)) == datetime(2026, 11, 30, 17, 30, tzinfo=UTC)
    assert hour_floor(datetime(2026, 12, 1, 0, 15, tzinfo=KOLKATA)) == day_start(date(2026, 12, 1))
    assert hour_floor(datetime(2026, 11, 30, 23, 45, tzinfo=KOLKATA)) == datetime(2026, 11, 30, 23, tzinfo=KOLKATA)
    assert rollup_day_start(date(2026, 11, 30)) == datetime(2026, 11, 30, 0, 30, tzinfo=UTC)
    assert rollup_day_of(datetime(2026, 12, 1, 0, 15, tzinfo=UTC)) == date(2026, 11, 30)


def _buckets_fit_days(month: date, zone: ZoneInfo) -> tuple[int, set[float]]:
    """The hour buckets of the local month: how many, and the local days' lengths in hours; each
    bucket must lie in one local day."""
    start, end = month_start(month, zone), month_end(month, zone)
    assert hour_floor(start) == start and hour_floor(end) == end
    bucket, count = start, 0
    while bucket < end:
        assert day_of(bucket, zone) == day_of(bucket + timedelta(minutes=59, seconds=59), zone), bucket
        bucket, count = bucket + timedelta(hours=1), count + 1
    lengths = {(day_end(d, zone) - day_start(d, zone)) / timedelta(hours=1) for d in month_days(month)}
    return count, lengths


@pytest.mark.parametrize(
    ("name", "month", "hours", "lengths"),
    [
        ("Australia/Adelaide", date(2026, 10, 1), 31 * 24 - 1, {23, 24}),  # +09:30 to +10:30 on 4 October
        ("Australia/Adelaide", date(2026, 4, 1), 30 * 24 + 1, {24, 25}),  # back on 5 April
        ("America/St_Johns", date(2026, 3, 1), 31 * 24 - 1, {23, 24}),  # -03:30 to -02:30 on 8 March
        ("America/St_Johns", date(2026, 11, 1), 30 * 24 + 1, {24, 25}),
        ("Asia/Kathmandu", date(2026, 12, 1), 31 * 24, {24}),
    ],
)
def test_a_dst_month_of_half_hours_is_whole_buckets_each_in_one_day(
    settings: Any, name: str, month: date, hours: int, lengths: set[float]
) -> None:
    settings.ACCOUNTING_TZ = name

    assert _buckets_fit_days(month, ZoneInfo(name)) == (hours, lengths)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["UTC", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns"])
def test_its_sql_floors_to_the_local_hour_as_python_and_date_trunc_do(settings: Any, name: str) -> None:
    from django.db import connection

    settings.ACCOUNTING_TZ = name
    instants = [
        datetime(2026, 12, 1, 0, 30, tzinfo=SHANGHAI),
        datetime(2026, 3, 29, 1, 59, 59, 999999, tzinfo=BERLIN),
        datetime(2026, 12, 31, 23, 0, tzinfo=UTC),
        datetime(2026, 11, 30, 18, 14, 59, tzinfo=UTC),
        datetime(2026, 11, 30, 18, 15, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=ZoneInfo("America/St_Johns")),
        datetime(1999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC),
    ]
    with connection.cursor() as cursor:
        for at in instants:
            cursor.execute(
                f"SELECT {hour_floor_sql('%s::timestamptz')}, date_trunc('hour', %s::timestamptz, %s)", [at, at, name]
            )
            floor, local = cursor.fetchone()
            assert floor == hour_floor(at), at
            # The zone's hour, where its offset is that of the books' years (Kathmandu was +05:30 in 1969).
            assert floor == local or at.year < CHECKED_YEARS.start, at


def test_it_writes_instants_with_the_zones_offset() -> None:
    assert iso_local(datetime(2026, 10, 31, 16, tzinfo=UTC), SHANGHAI) == "2026-11-01T00:00:00+08:00"


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("Australia/Lord_Howe", "+11:00 on 2000-01-01 and +10:30 on 2000-03-26"),  # half an hour of DST
        ("Asia/Pyongyang", "+09:00 on 2000-01-01 and +08:30 on 2015-08-15"),
    ],
)
def test_it_refuses_a_zone_whose_minutes_change(name: str, change: str) -> None:
    problem = zone_problem(name)

    assert problem is not None and change in problem and name in problem


@pytest.mark.parametrize(
    "name",
    [
        "UTC",
        "Asia/Shanghai",
        "Europe/Berlin",
        "America/New_York",
        "Asia/Singapore",
        "Asia/Kolkata",
        "Asia/Kathmandu",
        "Asia/Tehran",
        "Australia/Adelaide",
        "America/St_Johns",
    ],
)
def test_it_accepts_zones_whose_minutes_stay_dst_or_not(name: str) -> None:
    assert zone_problem(name) is None


def test_it_refuses_an_unknown_zone() -> None:
    assert "not an IANA time zone" in (zone_problem("Mars/Olympus_Mons") or "")


def test_it_raises_where_the_setting_is_read_and_fails_the_system_check(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Australia/Lord_Howe"

    with pytest.raises(ZoneError, match=r"COSTPLATFORM_ACCOUNTING_TZ='Australia/Lord_Howe'.*\+11:00"):
        accounting_zone()
    errors = [m for m in checks.run_checks() if m.id == "costplatform.E001"]
    assert len(errors) == 1 and errors[0].level == checks.ERROR


@pytest.mark.parametrize("name", ["Europe/Berlin", "Asia/Kolkata"])
def test_it_passes_the_system_check_for_a_zone_whose_minutes_stay(settings: Any, name: str) -> None:
    settings.ACCOUNTING_TZ = name

    assert not [m for m in checks.run_checks() if m.id == "costplatform.E001"]
    assert accounting_zone() == ZoneInfo(name)


@pytest.mark.parametrize("value", ["2026-13", "2026-1", "26-11", "2026-11-01", "", "2026-0x", "november"])
def test_it_refuses_what_is_not_a_month(value: str) -> None:
    with pytest.raises(BucketError, match="is not a month \\(YYYY-MM\\)"):
        parse_month(value)


@pytest.mark.parametrize("value", ["2026-02-30", "2026-2-01", "2026-11", "2026/11/01", "2026-11-01T00"])
def test_it_refuses_what_is_not_a_day(value: str) -> None:
    with pytest.raises(BucketError, match="is not a day \\(YYYY-MM-DD\\)"):
        parse_day(value)


def test_it_parses_months_and_days() -> None:
    assert parse_month("2026-11") == date(2026, 11, 1)
    assert parse_day("2026-02-28") == date(2026, 2, 28)


@pytest.mark.parametrize(
    ("stamps", "days"),
    [
        (["2026-03-01T07:59:00+08:00", "2026-02-28T23:00:00Z"], {"2026-02-28"}),
        (["2026-03-01T08:00:00+08:00", "2026-02-28T23:00:00Z"], {"2026-02-28", "2026-03-01"}),
        (["2026-02-28T23:00:00Z", "2026-03-01T00:30:00+01:00", "2026-03-02T00:00:00Z"], {"2026-02-28", "2026-03-02"}),
    ],
)
def test_a_batch_falls_in_the_utc_days_of_its_instants_whatever_offset_they_came_with(stamps, days):
    instants = [datetime.fromisoformat(stamp) for stamp in stamps]

    assert {day.isoformat() for day in utc_buckets(instants, datetime.date)} == days
