"""A budget read as finance reads it, as pure functions over the figures: how far the
accounting month has gone, the budget pro-rated to that point, the variance signed and judged
by the account's nature, and the forecast to the month's end at the pace so far.

The month's progress counts **days**: every day of the month weighs the same (a budget of
3,000 over 30 days is 100 a day), and the day in progress counts by the share of its own hours
gone. So a 23- or 25-hour day of a DST change is still one day of the budget, and the
pro-rated budget at a day's end is the same in every zone (docs/budgets.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from apps.common.buckets import day_end, day_of, day_start, month_days, month_end, month_of, month_start
from apps.common.formats import EXPENSE, FAVOURABLE_SIDE, REVENUE, Variance, judged

__all__ = [
    "EXPENSE",
    "FAVOURABLE_SIDE",
    "REVENUE",
    "MonthProgress",
    "Variance",
    "forecast",
    "judged",
    "month_progress",
    "pro_rated",
    "used",
    "variance",
]

SHARE = Decimal("0.000001")  # a progress or a share: six places
CENT = Decimal("0.01")
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class MonthProgress:
    """How much of an accounting month has gone at an instant."""

    month: date
    days: int  # the month's days
    elapsed_days: Fraction  # whole days gone, plus the share of today's hours gone

    @property
    def share(self) -> Fraction:
        return self.elapsed_days / self.days

    @property
    def started(self) -> bool:
        return self.elapsed_days > 0

    @property
    def complete(self) -> bool:
        return self.elapsed_days >= self.days

    @property
    def share_text(self) -> Decimal:
        return _decimal(self.share).quantize(SHARE, ROUND_HALF_EVEN)


def month_progress(*, month: date, now: datetime) -> MonthProgress:
    """How much of `month` (an accounting month) has gone at `now`, in days of the accounting zone."""
    month = month_of(month)
    days = len(month_days(month))
    if now >= month_end(month):
        return MonthProgress(month, days, Fraction(days))
    if now < month_start(month):
        return MonthProgress(month, days, Fraction(0))
    today = day_of(now)
    start, end = day_start(today), day_end(today)
    today_share = Fraction((now - start) // _TICK, (end - start) // _TICK)
    return MonthProgress(month, days, (today - month).days + today_share)


def pro_rated(budget: Decimal | int | None, progress: MonthProgress) -> Decimal | int | None:
    """The part of a month's budget due by now: money to the cent, tokens to the token."""
    if budget is None:
        return None
    exact = Fraction(budget) * progress.share
    if isinstance(budget, int):
        return round(exact)
    return _decimal(exact).quantize(CENT, ROUND_HALF_EVEN)


def forecast(actual: Decimal | int, progress: MonthProgress) -> Decimal | int | None:
    """The month's total at the pace so far (actual / share of the month gone); the actual
    itself once the month is over; None before it starts."""
    if not progress.started:
        return None
    exact = Fraction(actual) / progress.share
    if isinstance(actual, int):
        return round(exact)
    return _decimal(exact).quantize(CENT, ROUND_HALF_EVEN)


def variance(actual: Decimal | int, budget: Decimal | int | None, *, nature: str = EXPENSE) -> Variance | None:
    """How far `actual` is from `budget`, signed (actual - budget) and judged by `nature`."""
    if budget is None:
        return None
    amount = actual - budget
    share = (Decimal(amount) / Decimal(budget)).quantize(SHARE, ROUND_HALF_EVEN) if budget else None
    return judged(amount, share, nature=nature)


def used(actual: Decimal | int, budget: Decimal | int | None) -> Decimal | None:
    """The share of a month's budget used (0-1, may pass 1); None without a budget."""
    if not budget:
        return None
    return (Decimal(actual) / Decimal(budget)).quantize(SHARE, ROUND_HALF_EVEN)


def _decimal(value: Fraction) -> Decimal:
    return Decimal(value.numerator) / Decimal(value.denominator)
