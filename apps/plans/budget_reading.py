"""The budgets page's reading of an accounting month: each business line's budget, in money and
in tokens, against what it has spent and used so far, the budget pro-rated over the month's days
gone, the variance signed and judged as an expense, and the forecast to the month's end
(apps/plans/variance.py). Lines without a budget, idle capacity and usage of no business line
are shown apart, so the "budget used" of a total is that of the lines that have a budget, and
the sum of every part is the finance page's total.

Money is what the journal booked to the month's expense accounts (adjustments included), in the
functional currency. Tokens against a token budget are counted as the budget counts them
(prompt + completion of every record, as records arrive: apps/plans/budget_state.py); the
tokens the ledger booked (processed tokens: padding, rejected drafts and recompute too, as the
hours are priced) are shown beside them, as the finance page shows them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from django.db.models import F, Sum
from django.utils.translation import gettext as _

from apps.common.buckets import month_of
from apps.currencies.rates import functional_currency
from apps.ledger import conf
from apps.ledger.models import Account, JournalLine
from apps.ledger.names import names_load
from apps.plans.budget_state import tokens_by_line
from apps.plans.models import Budget
from apps.plans.variance import MonthProgress, Variance, forecast, month_progress, pro_rated, used, variance

# The keys of the rows that are not a business line (the `data-scope` of their figures).
BUDGETED, UNBUDGETED, IDLE, UNASSIGNED, ALL = "budgeted", "unbudgeted", "idle", "unassigned", "all"


@dataclass(frozen=True)
class Measure:
    """One figure of a row against its budget (money or tokens)."""

    actual: Decimal | int
    budget: Decimal | int | None = None  # the month's
    to_date: Decimal | int | None = None  # the month's budget pro-rated to now
    variance: Variance | None = None  # actual - to_date
    used: Decimal | None = None  # actual / the month's budget
    forecast: Decimal | int | None = None  # at the month's end, at the pace so far


def measure(actual: Decimal | int, budget: Decimal | int | None, progress: MonthProgress) -> Measure:
    to_date = pro_rated(budget, progress)
    return Measure(actual, budget, to_date, variance(actual, to_date), used(actual, budget), forecast(actual, progress))


@dataclass(frozen=True)
class Row:
    key: str  # the business line, or one of the keys above
    name: str  # as finance names it
    measure: Measure
    booked_tokens: int | None = None  # the tokens table: processed tokens the ledger booked

    @property
    def counted_scope(self) -> str:
        """The `data-scope` of the tokens counted against a token budget (the booked ones are
        `tokens` of the row's own scope, as on the finance page)."""
        return f"{self.key}:counted"


@dataclass
class Section:
    """A table of the page: the budgeted lines and their total, the others and theirs, the
    parts that are no business line's, and everything."""

    budgeted: list[Row] = field(default_factory=list)
    unbudgeted: list[Row] = field(default_factory=list)
    apart: list[Row] = field(default_factory=list)  # idle capacity, usage of no line
    budgeted_total: Row | None = None
    unbudgeted_total: Row | None = None
    total: Row | None = None


@dataclass(frozen=True)
class BudgetReading:
    month: date
    progress: MonthProgress
    currency: str
    money: Section
    tokens: Section


@dataclass
class _Booked:
    money: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))  # line -> spend
    tokens: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # line -> processed tokens
    idle: Decimal = Decimal(0)
    no_line: Decimal = Decimal(0)
    no_line_tokens: int = 0


def budget_reading(*, month: date, now: datetime, business_lines: list[str] | None = None) -> BudgetReading:
    """The month's budgets against its books as of `now`; only `business_lines` unless None
    (a reader of some lines sees neither idle capacity nor usage of no line)."""
    month = month_of(month)
    progress = month_progress(month=month, now=now)
    currency = functional_currency()
    unassigned = conf.get("LEDGER_UNASSIGNED")
    booked = _booked(month, currency)
    counted = tokens_by_line(month=month, unassigned=unassigned)
    budgets = {b.business_line: b for b in Budget.objects.of_lines().filter(month=month)}
    names = names_load()
    lines = (set(booked.money) | set(booked.tokens) | set(counted) | set(budgets)) - {unassigned}
    if business_lines is not None:
        lines &= set(business_lines)

    def name(line: str) -> str:
        return names.centre(line)

    money, tokens = Section(), Section()
    for line in sorted(lines, key=name):
        budget = budgets.get(line)
        amount = budget.amount if budget is not None and budget.currency == currency else None
        row = Row(line, name(line), measure(booked.money.get(line, Decimal(0)), amount, progress))
        (money.budgeted if amount is not None else money.unbudgeted).append(row)
        count = budget.tokens if budget is not None else None
        row = Row(line, name(line), measure(counted.get(line, 0), count, progress), booked.tokens.get(line, 0))
        (tokens.budgeted if count is not None else tokens.unbudgeted).append(row)
    if business_lines is None:
        _apart(money, tokens, booked, counted.get(unassigned, 0), progress)
    _totals(money, progress, _("All spend"))
    _totals(tokens, progress, _("All tokens"))
    return BudgetReading(month, progress, currency, money, tokens)


def _apart(money: Section, tokens: Section, booked: _Booked, no_line_count: int, progress: MonthProgress) -> None:
    """Idle capacity and usage of no business line: no budget covers them."""
    no_line = _("Usage of no business line")
    if booked.idle:
        money.apart.append(Row(IDLE, _("Idle capacity"), measure(booked.idle, None, progress)))
    if booked.no_line:
        money.apart.append(Row(UNASSIGNED, no_line, measure(booked.no_line, None, progress)))
    if no_line_count or booked.no_line_tokens:
        tokens.apart.append(Row(UNASSIGNED, no_line, measure(no_line_count, None, progress), booked.no_line_tokens))


def _booked(month: date, currency: str) -> _Booked:
    """The month's expense lines in `currency` by business line; those of the idle and unassigned
    cost centres apart: idle capacity (the idle-capacity account's) and usage of no line (the rest)."""
    no_line = {conf.get("LEDGER_UNASSIGNED"), conf.get("LEDGER_IDLE_COST_CENTRE")}
    rows = (
        JournalLine.objects.filter(period_id=month, account__kind=Account.Kind.EXPENSE, currency=currency)
        .values("cost_centre", "account__role")
        .annotate(net=Sum(F("debit") - F("credit")), tokens=Sum("tokens"))
        .order_by()
    )
    found = _Booked()
    for row in rows:
        if row["cost_centre"] not in no_line:
            found.money[row["cost_centre"]] += row["net"]
            found.tokens[row["cost_centre"]] += row["tokens"]
        elif row["account__role"] == Account.Role.IDLE:
            found.idle += row["net"]
        else:
            found.no_line += row["net"]
            found.no_line_tokens += row["tokens"]
    return found


def _totals(section: Section, progress: MonthProgress, everything: str) -> None:
    section.budgeted_total = _sum(BUDGETED, _("Lines with a budget"), section.budgeted, progress, budgeted=True)
    section.unbudgeted_total = _sum(UNBUDGETED, _("Lines without a budget"), section.unbudgeted, progress)
    # Everything has no budget: a budget covers only its line, so the share of the whole is no reading.
    section.total = _sum(ALL, everything, [*section.budgeted, *section.unbudgeted, *section.apart], progress)


def _sum(key: str, label: str, rows: list[Row], progress: MonthProgress, *, budgeted: bool = False) -> Row | None:
    if not rows:
        return None
    actual = sum((r.measure.actual for r in rows), type(rows[0].measure.actual)(0))
    budgets = [r.measure.budget for r in rows if r.measure.budget is not None]
    budget = sum(budgets, type(budgets[0])(0)) if budgeted and budgets else None
    booked = [r.booked_tokens for r in rows if r.booked_tokens is not None]
    return Row(key, label, measure(actual, budget, progress), sum(booked) if booked else None)
