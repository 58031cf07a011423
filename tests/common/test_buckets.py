"""The time buckets of the accounting zone: local days as UTC instants, DST days, refused zones
and the month and day parameters."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core import checks

from apps.common.buckets import (
    BucketError,
    ZoneError,
    accounting_zone,
    day_end,
    day_of,
    day_start,
    hour_floor,
    hour_floor_sql,
    iso_local,
    month_end,
    month_of,
    month_start,
    parse_day,
    parse_month,
    utc_buckets,
    zone_problem,
)

SHANGHAI, BERLIN = ZoneInfo("Asia/Shanghai"), ZoneInfo("Europe/Berlin")


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


def test_it_floors_to_the_utc_hour_whatever_the_offset() -> None:
    at = datetime(2026, 12, 1, 0, 30, tzinfo=SHANGHAI)

    assert hour_floor(at) == datetime(2026, 11, 30, 16, tzinfo=UTC)


@pytest.mark.django_db
def test_its_sql_floors_to_the_utc_hour_as_python_and_date_trunc_do() -> None:
    from django.db import connection

    instants = [
        datetime(2026, 12, 1, 0, 30, tzinfo=SHANGHAI),
        datetime(2026, 3, 29, 1, 59, 59, 999999, tzinfo=BERLIN),
        datetime(2026, 12, 31, 23, 0, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=ZoneInfo("America/St_Johns")),
        datetime(1999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC),
    ]
    with connection.cursor() as cursor:
        for at in instants:
            cursor.execute(
                f"SELECT {hour_floor_sql('%s::timestamptz')}, date_trunc('hour', %s::timestamptz, 'UTC')", [at, at]
            )
            assert cursor.fetchone() == (hour_floor(at), hour_floor(at)), at


def test_it_writes_instants_with_the_zones_offset() -> None:
    assert iso_local(datetime(2026, 10, 31, 16, tzinfo=UTC), SHANGHAI) == "2026-11-01T00:00:00+08:00"


@pytest.mark.parametrize("name", ["Asia/Kolkata", "Australia/Adelaide", "Asia/Kathmandu", "Asia/Pyongyang"])
def test_it_refuses_zones_whose_offset_is_not_whole_hours(name: str) -> None:
    problem = zone_problem(name)

    assert problem is not None and "not a whole number of hours" in problem and name in problem


@pytest.mark.parametrize("name", ["UTC", "Asia/Shanghai", "Europe/Berlin", "America/New_York", "Asia/Singapore"])
def test_it_accepts_whole_hour_zones_dst_or_not(name: str) -> None:
    assert zone_problem(name) is None


def test_it_refuses_an_unknown_zone() -> None:
    assert "not an IANA time zone" in (zone_problem("Mars/Olympus_Mons") or "")


def test_it_raises_where_the_setting_is_read_and_fails_the_system_check(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Kolkata"

    with pytest.raises(ZoneError, match=r"COSTPLATFORM_ACCOUNTING_TZ='Asia/Kolkata'.*\+05:30"):
        accounting_zone()
    errors = [m for m in checks.run_checks() if m.id == "costplatform.E001"]
    assert len(errors) == 1 and errors[0].level == checks.ERROR


def test_it_passes_the_system_check_for_a_whole_hour_zone(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Europe/Berlin"

    assert not [m for m in checks.run_checks() if m.id == "costplatform.E001"]
    assert accounting_zone() == BERLIN


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
