"""Issue 15's acceptance for the accounting time zone: a record at 23:30 on the last day of a
month in Asia/Shanghai (15:30 UTC) is booked into that month, one at 00:30 on the 1st (16:30 UTC
the day before) into the next, through the ingest API, pricing, accrual, close and the FOCUS export."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pytest
import time_machine
from django.core import checks
from django.db.models import Sum
from django.test import Client

from apps.common.buckets import ZoneError
from apps.ingest import services as ingest_services
from apps.ingest.models import HourlyUsage
from apps.ledger.models import JournalLine, Period
from apps.ledger.services.accrual import month_accrue, recent_accrue
from apps.ledger.services.periods import period_close
from apps.pricing.services import hours_price
from tests import factories
from tests.factories import record

pytestmark = pytest.mark.django_db
Role = Callable[[str | None], Client]
NOV, DEC = date(2026, 11, 1), date(2026, 12, 1)
NOW = datetime(2026, 12, 3, 4, tzinfo=UTC)


def _tokens(**filters: Any) -> int:
    return JournalLine.objects.filter(account__kind="expense", **filters).aggregate(t=Sum("tokens"))["t"] or 0


def _focus(client: Client, period: str) -> list[dict[str, str]]:
    response = client.get(f"/api/v1/exports/focus?period={period}&focus_version=1.2")  # local offsets: 1.2
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode().lstrip("\ufeff"))))


@pytest.fixture
def shanghai(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"


@time_machine.travel(NOW, tick=False)
def test_it_books_the_last_local_hour_into_the_month_and_the_first_into_the_next(
    shanghai: None, collector: Any, as_role: Role
) -> None:
    late = record(ts="2026-11-30T23:30:00+08:00", tokens={"prompt": 1000, "completion": 100}, prompt_hash="a" * 32)
    early = record(ts="2026-12-01T00:30:00+08:00", tokens={"prompt": 3000, "completion": 300}, prompt_hash="b" * 32)
    assert collector.send([late, early]).json()["accepted"] == 2
    factories.price_version(effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={"qwen*": ("1", "0.1", "4")})
    hours_price(start=datetime(2026, 11, 30, tzinfo=UTC), end=datetime(2026, 12, 1, tzinfo=UTC))

    recent_accrue()
    period_close(month=NOV)

    assert _tokens(period_id=NOV) == _tokens(day=date(2026, 11, 30)) == 1100
    assert _tokens(period_id=DEC) == _tokens(day=date(2026, 12, 1)) == 3300
    assert Period.objects.get(month=NOV).status == Period.Status.CLOSED
    rows = _focus(as_role("finance"), "2026-11")
    assert {r["BillingPeriodStart"] for r in rows} == {"2026-11-01T00:00:00+08:00"}
    assert {r["BillingPeriodEnd"] for r in rows} == {"2026-12-01T00:00:00+08:00"}
    assert {(r["ChargePeriodStart"], r["ChargePeriodEnd"]) for r in rows} == {
        ("2026-11-30T00:00:00+08:00", "2026-12-01T00:00:00+08:00")
    }
    assert sum(int(r["ConsumedQuantity"]) for r in rows) == 1100


# --- changing the zone -------------------------------------------------------------------------

SEP, OCT = date(2026, 9, 1), date(2026, 10, 1)
SEP_EDGE = datetime(2026, 9, 30, 20, tzinfo=UTC)  # 30 Sep in UTC, 1 Oct 04:00 in Shanghai
OCT_FIRST = datetime(2026, 10, 1, 2, tzinfo=UTC)  # 1 Oct in both
OCT_EDGE = datetime(2026, 10, 31, 20, tzinfo=UTC)  # 31 Oct in UTC, 1 Nov 04:00 in Shanghai


def _journal_of(month: date) -> list[tuple[Any, ...]]:
    return list(
        JournalLine.objects.filter(period_id=month)
        .order_by("pk")
        .values_list("pk", "day", "account_id", "cost_centre", "debit", "credit", "tokens")
    )


@pytest.fixture
def books_in_utc(settings: Any) -> None:
    """September closed and October accrued, both in UTC."""
    settings.ACCOUNTING_TZ = "UTC"
    for hour, tokens in ((SEP_EDGE, 100), (OCT_FIRST, 50), (OCT_EDGE, 1000)):
        factories.hourly_cost(hour=hour, cost=f"{tokens / 100}", tokens=tokens)
    with time_machine.travel(datetime(2026, 10, 20, tzinfo=UTC), tick=False):
        recent_accrue()
        period_close(month=SEP)
    with time_machine.travel(datetime(2026, 11, 2, tzinfo=UTC), tick=False):
        recent_accrue()
    assert (_tokens(period_id=SEP), _tokens(period_id=OCT)) == (100, 1050)


@time_machine.travel(datetime(2026, 11, 2, 1, tzinfo=UTC), tick=False)
def test_it_re_accrues_open_months_in_the_new_zone_and_leaves_closed_ones(books_in_utc: None, settings: Any) -> None:
    closed_before = _journal_of(SEP)
    settings.ACCOUNTING_TZ = "Asia/Shanghai"

    recent_accrue()

    assert _journal_of(SEP) == closed_before
    assert Period.objects.get(month=SEP).tz == "UTC"
    # October now ends at Shanghai's midnight (its last UTC hours go to November) but still
    # starts where the closed September ended: its first eight hours are not booked twice.
    assert (_tokens(period_id=OCT), _tokens(period_id=NOV)) == (50, 1000)
    assert _tokens(day=date(2026, 11, 1)) == 1000
    assert Period.objects.get(month=OCT).tz == "Asia/Shanghai"


@time_machine.travel(datetime(2026, 11, 2, 1, tzinfo=UTC), tick=False)
def test_it_exports_a_month_that_starts_where_a_closed_month_of_another_zone_ended(
    books_in_utc: None, settings: Any, as_role: Role
) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    recent_accrue()

    rows = _focus(as_role("finance"), "2026-10")

    assert {(r["BillingPeriodStart"], r["BillingPeriodEnd"]) for r in rows} == {
        ("2026-10-01T08:00:00+08:00", "2026-11-01T00:00:00+08:00")
    }
    assert {r["ChargePeriodStart"] for r in rows} == {"2026-10-01T08:00:00+08:00"}


def test_it_re_accrues_an_open_month_older_than_the_beat_jobs_lookback(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "UTC"
    factories.hourly_cost(hour=datetime(2026, 3, 31, 20, tzinfo=UTC), cost="1", tokens=7)
    month_accrue(month=date(2026, 3, 1))
    settings.ACCOUNTING_TZ = "Asia/Shanghai"

    with time_machine.travel(datetime(2026, 11, 2, 1, tzinfo=UTC), tick=False):
        recent_accrue()

    assert _tokens(day=date(2026, 4, 1)) == 7
    assert _tokens(period_id=date(2026, 3, 1)) == 0


@time_machine.travel(datetime(2026, 11, 2, 1, tzinfo=UTC), tick=False)
def test_it_does_nothing_while_the_zone_stays(books_in_utc: None) -> None:
    before = _journal_of(OCT)

    recent_accrue()

    assert _journal_of(OCT) == before


@time_machine.travel(datetime(2026, 11, 2, 1, tzinfo=UTC), tick=False)
def test_it_refuses_to_accrue_in_a_zone_of_half_hours_over_rollups_of_whole_hours(
    books_in_utc: None, settings: Any
) -> None:
    settings.ACCOUNTING_TZ = "Asia/Kolkata"

    with pytest.raises(ZoneError, match=r"pricing_hourlycost holds hours that start at :00.*docs/ledger.md"):
        recent_accrue()
    assert Period.objects.get(month=OCT).tz == "UTC"
    errors = [m for m in checks.run_checks(databases=["default"]) if m.id == "costplatform.E002"]
    assert len(errors) == 1 and "from :30 past each UTC hour" in errors[0].msg


@time_machine.travel(NOW, tick=False)
def test_it_refuses_a_batch_in_a_zone_of_half_hours_over_rollups_of_whole_hours(
    settings: Any, collector: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.ACCOUNTING_TZ = "UTC"
    assert collector.send([record(ts="2026-12-01T10:20:00+00:00")]).json()["accepted"] == 1
    settings.ACCOUNTING_TZ = "Asia/Kolkata"
    monkeypatch.setattr(ingest_services, "_statements", {})  # as a process started in this zone

    with pytest.raises(ZoneError, match=r"ingest_hourlyusage holds hours that start at :00"):
        collector.send([record(ts="2026-12-01T10:20:00+05:30")])
    assert list(HourlyUsage.objects.values_list("hour", flat=True)) == [datetime(2026, 12, 1, 10, tzinfo=UTC)]


@time_machine.travel(datetime(2026, 11, 20, tzinfo=UTC), tick=False)
def test_it_books_a_25_hour_dst_day_whole(settings: Any, as_role: Role) -> None:
    settings.ACCOUNTING_TZ = "Europe/Berlin"
    first, last, after = (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 22, tzinfo=UTC),
                          datetime(2026, 10, 25, 23, tzinfo=UTC))  # fmt: skip
    for hour, tokens in ((first, 1), (last, 10), (after, 100)):
        factories.hourly_cost(hour=hour, cost="1", tokens=tokens)

    month_accrue(month=OCT)

    assert _tokens(day=date(2026, 10, 25)) == 11
    assert _tokens(day=date(2026, 10, 26)) == 100
    periods = {(r["ChargePeriodStart"], r["ChargePeriodEnd"]) for r in _focus(as_role("finance"), "2026-10")}
    assert periods == {
        ("2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"),  # summer time ends in the night
        ("2026-10-26T00:00:00+01:00", "2026-10-27T00:00:00+01:00"),
    }
