"""Numbers as finance reads them: money with thousands separators and two places, negatives in
parentheses, percentages as percentages (0.8312 -> 83.1 %), counts with separators, and an
em dash for "none". Each formatter gives the text and a CSS class (neg, zero, none) so a page
can show the state as well as the number."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.translation import gettext as _

from apps.common.buckets import accounting_zone

NONE = "\u2014"  # em dash: no value (no budget, no previous month)
CENT = Decimal("0.01")


def money_text(value: Decimal | int | float | None) -> str:
    """'1,234.56'; '(1,234.56)' when negative; '—' for None."""
    if value is None:
        return NONE
    amount = Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)
    text = f"{abs(amount):,.2f}"
    return f"({text})" if amount < 0 else text


def pct_text(value: Decimal | float | None, places: int = 1) -> str:
    """A fraction as a percentage: 0.8312 -> '83.1 %', -0.05 -> '-5.0 %'; '—' for None."""
    if value is None:
        return NONE
    return f"{Decimal(value) * 100:,.{places}f} %".replace("-0.0 %", "0.0 %")


def int_text(value: int | None) -> str:
    return NONE if value is None else f"{int(value):,}"


def when_text(value: date | datetime | None, zone: ZoneInfo | None = None, *, seconds: bool = False) -> str:
    """A day as YYYY-MM-DD; an instant as YYYY-MM-DD HH:MM (HH:MM:SS with `seconds`, never
    microseconds) in `zone`, the accounting zone by default (downloads; pages pass the reader's)."""
    if value is None:
        return NONE
    if isinstance(value, datetime):
        shown = value.astimezone(zone or accounting_zone())
        return f"{shown:%Y-%m-%d %H:%M:%S}" if seconds else f"{shown:%Y-%m-%d %H:%M}"
    return f"{value:%Y-%m-%d}"


def state_of(value: Any) -> str:
    """The CSS class of a number: 'neg' below zero, 'zero' at zero, 'none' when missing."""
    if value is None:
        return "none"
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return "neg" if value < 0 else "zero" if value == 0 else ""
    return ""


def cell_text(value: Any, kind: str) -> str:
    """A raw value as its column kind shows it (apps.common.tables.Column.kind)."""
    if kind == "money":
        return money_text(value)
    if kind == "pct":
        return pct_text(value)
    if kind == "int":
        return int_text(value)
    if kind in ("date", "datetime"):
        return when_text(value)
    return NONE if value is None or value == "" else str(value)


# Which side of a budget is favourable, by the nature of what it limits: spending less than an
# expense budget is good, earning less than a revenue budget is not. The budgets' arithmetic is
# the plans' (apps/plans/variance.py); how a variance reads is every page's.
EXPENSE, REVENUE = "expense", "revenue"
FAVOURABLE_SIDE = {EXPENSE: "under", REVENUE: "over"}


@dataclass(frozen=True)
class Variance:
    """Actual minus budget: positive is over the budget. Whether that is good depends on the
    nature of what the budget limits (an expense's over is unfavourable)."""

    amount: Decimal | int
    share: Decimal | None  # amount / budget, None for a zero budget
    side: str  # "over", "under" or "on"
    favourable: bool | None  # None on budget

    @property
    def tone(self) -> str:
        """The CSS class: favourable (green), unfavourable (red) or even."""
        return "even" if self.favourable is None else "favourable" if self.favourable else "unfavourable"

    @property
    def word(self) -> str:
        """The side in words, so the colour is never the only sign."""
        return {"over": _("over"), "under": _("under")}.get(self.side, _("on budget"))


def judged(amount: Decimal | int, share: Decimal | None = None, *, nature: str = EXPENSE) -> Variance:
    """A variance already worked out (actual - budget), judged by `nature`."""
    side = "over" if amount > 0 else "under" if amount < 0 else "on"
    return Variance(amount, share, side, None if side == "on" else side == FAVOURABLE_SIDE[nature])
