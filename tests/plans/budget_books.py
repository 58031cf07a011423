"""Books of a month half gone, for the budgets page's tests: the clock at the first instant of
the 16th of next month in the accounting zone (15 days gone, whatever the zone), three lines'
records on each of those days priced by a price version, and a GPU pool serving another model
whose hours are mostly idle; the month accrued. The budgets are set against what was booked:
support well under its part due by now, search over it (though under the month's whole budget,
so a page comparing with the whole month would call it under)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from apps.common.buckets import day_start, month_days, month_of, month_start, next_month
from apps.ledger.models import Account, JournalLine
from apps.ledger.services.accrual import month_accrue
from apps.plans.planning import budget_set
from apps.pricing.services import hours_price
from tests import factories

DAYS_GONE = 15
LINES = ("support", "search", "ads")  # ads has no budget
TOKENS_BUDGET = 2 * 2 * 1380  # support's token budget a day: twice its records' tokens


def mid_month() -> datetime:
    """The 16th of next month, 00:00 in the accounting zone: its first 15 days are gone."""
    month = next_month(month_of(datetime.now(UTC)))
    return day_start(month.replace(day=DAYS_GONE + 1))


@dataclass(frozen=True)
class HalfMonth:
    month: date
    days: int
    spend: dict[str, Decimal]  # booked per cost centre
    idle: Decimal
    budgets: dict[str, Decimal]

    def due(self, line: str) -> Decimal:
        """The budget due by now, worked out here: the month's budget x 15 / the month's days."""
        exact = Fraction(self.budgets[line]) * DAYS_GONE / self.days
        return (Decimal(exact.numerator) / Decimal(exact.denominator)).quantize(Decimal("0.01"), ROUND_HALF_EVEN)


def books(collector: Any) -> HalfMonth:
    """Call with the clock at mid_month()."""
    now = datetime.now(UTC)
    month = month_of(now)
    factories.price_version(
        effective_from=month_start(month) - timedelta(days=1), prices={"llama-*": ("2000", "500", "8000")}
    )
    pool = {"gpus": 1, "cost_per_gpu_hour": Decimal("1.00"), "capacity": 10_000}
    factories.cost_pool(effective_from=month_start(month), **pool)
    records = []
    for day in month_days(month)[:DAYS_GONE]:
        noon = (day_start(day) + timedelta(hours=12)).isoformat()
        for n, line in enumerate(LINES, start=1):
            records += [
                factories.record(ts=noon, model="llama-3-70b", prompt_hash=None, dims={"business_line": line})
                for _ in range(n)
            ]
        records.append(factories.record(ts=noon, prompt_hash=None, dims={"business_line": "support"}))  # pooled
    assert collector.send(records).json()["accepted"] == len(records)
    hours_price(start=month_start(month), end=now)
    month_accrue(month=month)
    spend, idle = _booked(month)
    budgets = {
        # Due by now: twice what support spent; four fifths of what search spent.
        "support": _cents(spend["support"] * 2 * len(month_days(month)) / DAYS_GONE),
        "search": _cents(spend["search"] * Decimal("0.8") * len(month_days(month)) / DAYS_GONE),
    }
    # And support's tokens: due by now, twice what its records counted (2 a day, 1,380 tokens each).
    tokens = {"support": TOKENS_BUDGET * len(month_days(month))}
    for line, amount in budgets.items():
        budget_set(business_line=line, month=month, amount=amount, currency="CNY", tokens=tokens.get(line))
    return HalfMonth(month, len(month_days(month)), spend, idle, budgets)


def _booked(month: date) -> tuple[dict[str, Decimal], Decimal]:
    spend: dict[str, Decimal] = {}
    idle = Decimal(0)
    for line in JournalLine.objects.filter(period_id=month, account__kind="expense").select_related("account"):
        if line.account.role == Account.Role.IDLE:
            idle += line.debit - line.credit
        else:
            spend[line.cost_centre] = spend.get(line.cost_centre, Decimal(0)) + line.debit - line.credit
    return spend, idle


def _cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), ROUND_HALF_EVEN)
