"""Issue 34's acceptance for zones whose offset is not whole hours: books kept in Asia/Kolkata
(+05:30) get records at 23:45 and 00:15 IST around the 1st, both in the UTC hour 18:00, booked
in their own months through the record API, pricing, the accrual, the close and the FOCUS export;
a day boundary in Asia/Kathmandu (+05:45); a month of Australia/Adelaide that crosses its change
of clocks (+09:30 to +10:30, and back). The hour rollups are then kept in local hours."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core import checks
from django.db.models import Sum
from django.test import Client

from apps.classification.models import HourlyClass
from apps.common.buckets import day_end, day_start, month_end, month_start
from apps.ingest.models import HourlyUsage
from apps.ledger.models import JournalLine, Period
from apps.ledger.services.accrual import month_accrue, recent_accrue
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price
from tests import factories
from tests.factories import record

pytestmark = pytest.mark.django_db
Role = Callable[[str | None], Client]
NOV, DEC = date(2026, 11, 1), date(2026, 12, 1)
HOUR = timedelta(hours=1)


def _tokens(**filters: Any) -> int:
    return JournalLine.objects.filter(account__kind="expense", **filters).aggregate(t=Sum("tokens"))["t"] or 0


def _focus(client: Client, period: str) -> list[dict[str, str]]:
    response = client.get(f"/api/v1/exports/focus?period={period}&focus_version=1.2")  # local offsets: 1.2
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode().lstrip("\ufeff"))))


def _send_and_price(collector: Any, stamps: list[tuple[str, int]], start: datetime, end: datetime) -> None:
    """Records of `prompt` tokens (and a tenth as many completion) at the local stamps, priced."""
    records = [
        record(ts=ts, tokens={"prompt": prompt, "completion": prompt // 10}, prompt_hash=f"{i:032x}")
        for i, (ts, prompt) in enumerate(stamps)
    ]
    assert collector.send(records).json()["accepted"] == len(records)
    factories.price_version(effective_from=month_start(date(2026, 1, 1)), prices={"qwen*": ("1", "0.1", "4")})
    hours_price(start=start, end=end)


@time_machine.travel(datetime(2026, 12, 3, 4, tzinfo=UTC), tick=False)
def test_books_in_kolkata_put_23_45_and_00_15_around_the_1st_in_their_own_months(
    settings: Any, collector: Any, as_role: Role
) -> None:
    settings.ACCOUNTING_TZ = "Asia/Kolkata"
    # 18:15 and 18:45 UTC: one UTC hour, two local hours, two days, two months.
    stamps = [("2026-11-30T23:45:00+05:30", 1000), ("2026-12-01T00:15:00+05:30", 3000)]
    _send_and_price(collector, stamps, day_start(date(2026, 11, 30)), day_end(date(2026, 12, 1)))

    local_midnight = datetime(2026, 11, 30, 18, 30, tzinfo=UTC)
    assert set(HourlyUsage.objects.values_list("hour", "prompt")) == {
        (local_midnight - HOUR, 1000),
        (local_midnight, 3000),
    }
    assert set(HourlyClass.objects.values_list("hour", flat=True)) == {local_midnight - HOUR, local_midnight}
    assert set(HourlyCost.objects.values_list("hour", flat=True)) == {local_midnight - HOUR, local_midnight}
    assert not [m for m in checks.run_checks(databases=["default"]) if m.id == "costplatform.E002"]  # on its grid

    recent_accrue()
    period_close(month=NOV)

    assert _tokens(period_id=NOV) == _tokens(day=date(2026, 11, 30)) == 1100
    assert _tokens(period_id=DEC) == _tokens(day=date(2026, 12, 1)) == 3300
    assert Period.objects.get(month=NOV).status == Period.Status.CLOSED
    assert Period.objects.get(month=NOV).tz == "Asia/Kolkata"
    rows = _focus(as_role("finance"), "2026-11")
    assert {(r["BillingPeriodStart"], r["BillingPeriodEnd"]) for r in rows} == {
        ("2026-11-01T00:00:00+05:30", "2026-12-01T00:00:00+05:30")
    }
    assert {(r["ChargePeriodStart"], r["ChargePeriodEnd"]) for r in rows} == {
        ("2026-11-30T00:00:00+05:30", "2026-12-01T00:00:00+05:30")
    }
    assert sum(int(r["ConsumedQuantity"]) for r in rows) == 1100


@time_machine.travel(datetime(2026, 12, 3, 4, tzinfo=UTC), tick=False)
def test_books_in_kathmandu_cut_the_day_at_its_quarter_hour(settings: Any, collector: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Kathmandu"
    # 18:10 and 18:20 UTC: Kathmandu's midnight (+05:45) is 18:15 UTC.
    stamps = [("2026-11-20T23:55:00+05:45", 1000), ("2026-11-21T00:05:00+05:45", 3000)]
    _send_and_price(collector, stamps, day_start(date(2026, 11, 20)), day_end(date(2026, 11, 21)))

    month_accrue(month=NOV)

    assert set(HourlyUsage.objects.values_list("hour", flat=True)) == {
        datetime(2026, 11, 20, 17, 15, tzinfo=UTC),
        datetime(2026, 11, 20, 18, 15, tzinfo=UTC),
    }
    assert (_tokens(day=date(2026, 11, 20)), _tokens(day=date(2026, 11, 21))) == (1100, 3300)


@time_machine.travel(datetime(2026, 11, 3, 4, tzinfo=UTC), tick=False)
def test_books_in_adelaide_keep_a_month_that_changes_clocks_whole(settings: Any, collector: Any) -> None:
    settings.ACCOUNTING_TZ = "Australia/Adelaide"
    oct_ = date(2026, 10, 1)
    stamps = [
        ("2026-09-30T23:50:00+09:30", 1),  # September, an hour of the old offset
        ("2026-10-01T00:10:00+09:30", 10),
        ("2026-10-04T01:50:00+09:30", 100),  # 10 minutes before the clocks go forward (02:00 is 03:00)
        ("2026-10-04T03:10:00+10:30", 1000),  # 20 minutes after
        ("2026-10-31T23:50:00+10:30", 10000),
        ("2026-11-01T00:10:00+10:30", 100000),  # November
    ]
    _send_and_price(collector, stamps, month_start(oct_) - HOUR, month_end(oct_) + HOUR)

    month_accrue(month=date(2026, 9, 1))
    month_accrue(month=oct_)
    month_accrue(month=NOV)

    days = (date(2026, 9, 30), date(2026, 10, 1), date(2026, 10, 4), date(2026, 10, 31), date(2026, 11, 1))
    assert [_tokens(day=day) for day in days] == [1, 11, 110 + 1100, 11000, 110000]
    assert [_tokens(period_id=month) for month in (date(2026, 9, 1), oct_, NOV)] == [1, 12221, 110000]
    # 01:00 ACST and 03:00 ACDT, the 4th's second and third local hours (it has 23).
    fourth = HourlyUsage.objects.filter(hour__gte=day_start(date(2026, 10, 4)), hour__lt=day_end(date(2026, 10, 4)))
    assert sorted(fourth.values_list("hour", flat=True)) == [
        datetime(2026, 10, 3, 15, 30, tzinfo=UTC),
        datetime(2026, 10, 3, 16, 30, tzinfo=UTC),
    ]
    assert day_end(date(2026, 10, 4)) - day_start(date(2026, 10, 4)) == 23 * HOUR
