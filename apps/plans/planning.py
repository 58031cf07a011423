"""Budgets and revenue per business line and month, set by finance. Those of a closed month
are its books: changing them needs the month reopened (admin, with a reason)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.common.buckets import month_of, previous_month
from apps.ledger import conf
from apps.ledger.models import Account, CostCentre, JournalLine, Period
from apps.plans.models import CLOSED_MONTH, Budget, Revenue

BUDGET_EMPTY = "a budget needs an amount (with its currency), a token count, or both"


class PlanningError(ValueError):
    pass


def _month_open_check(month: date, what: str) -> None:
    # A close racing this write is refused by the database trigger (ledger_plan_guard).
    closed = Period.first_closed([month])
    if closed is not None:
        raise PlanningError(CLOSED_MONTH.format(month=f"{closed:%Y-%m}", what=what))


def budget_set(
    *,
    business_line: str,
    month: date,
    amount: Decimal | None = None,
    currency: str = "",
    tokens: int | None = None,
    user: Any = None,
    team: str = "",
    caller: str = "",
    dim: str = "",
    value: str = "",
    hard: bool | None = None,
) -> Budget:
    """Set (create or replace) a business line's budget for a month, or one of its team's, of
    one caller (the attribution map's name), or of one caller within one team; with `dim` and
    `value`, of the records carrying that value of a dim the hourly rollup keeps (within the
    line, team or caller); `hard` None keeps what the budget was (soft for a new one)."""
    if amount is None and tokens is None:
        raise PlanningError(BUDGET_EMPTY)
    if amount is not None and not currency:
        raise PlanningError("an amount needs its currency")
    _month_open_check(month, "budget")
    with transaction.atomic():
        key = {"business_line": business_line, "team": team, "caller": caller, "month": month_of(month)}
        key |= {"dim": dim, "value": value}
        budget = Budget.objects.select_for_update().filter(**key).first() or Budget(**key)
        budget.hard = budget.hard if hard is None else hard
        budget.amount, budget.currency, budget.tokens = amount, currency if amount is not None else "", tokens
        budget.updated_by = user
        budget.full_clean()
        budget.save()
    return budget


def revenue_set(*, business_line: str, month: date, amount: Decimal, currency: str, user: Any = None) -> Revenue:
    """Set (create or replace) a business line's revenue for a month, in one currency."""
    _month_open_check(month, "revenue")
    with transaction.atomic():
        revenue, _ = Revenue.objects.select_for_update().get_or_create(
            business_line=business_line, month=month_of(month), currency=currency, defaults={"amount": amount}
        )
        revenue.amount, revenue.entered_by = amount, user
        revenue.full_clean()
        revenue.save()
    return revenue


# --- the plans page: every line's budget and revenue of a month at once ----------------------------

OUTSIDE_SCOPE = "{line} is outside your business lines"


@dataclass
class PlanRow:
    """A business line's budget and revenue of a month, as the plans page edits them."""

    business_line: str
    budget_amount: Decimal | None = None
    budget_currency: str = ""
    budget_tokens: int | None = None
    revenue_amount: Decimal | None = None
    revenue_currency: str = ""

    def budget_key(self) -> tuple[Decimal | None, str, int | None]:
        return (self.budget_amount, self.budget_currency if self.budget_amount is not None else "", self.budget_tokens)


class PlanRowsError(PlanningError):
    """Errors of some rows (index -> message); nothing was saved."""

    def __init__(self, errors: dict[int, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


def plan_lines(*, month: date, business_lines: list[str] | None = None) -> list[str]:
    """The business lines a month's plans are about: those booked in it or the month before,
    those with a cost centre, and those with a budget or revenue then (the idle and unassigned
    cost centre excluded: nobody budgets it)."""
    month = month_of(month)
    months = [previous_month(month), month]
    lines = set(
        JournalLine.objects.filter(period_id__in=months, account__kind=Account.Kind.EXPENSE)
        .values_list("cost_centre", flat=True)
        .distinct()
    )
    lines |= set(CostCentre.objects.filter(active=True).values_list("business_line", flat=True))
    lines |= set(Budget.objects.of_lines().filter(month__in=months).values_list("business_line", flat=True))
    lines |= set(Revenue.objects.filter(month__in=months).values_list("business_line", flat=True))
    lines -= {conf.get("LEDGER_UNASSIGNED"), conf.get("LEDGER_IDLE_COST_CENTRE")}
    return sorted(line for line in lines if business_lines is None or line in business_lines)


def plan_rows(*, month: date, business_lines: list[str] | None = None) -> list[PlanRow]:
    """Each line's budget and revenue of the month (a line's first revenue currency if it has several)."""
    month = month_of(month)
    budgets = {b.business_line: b for b in Budget.objects.of_lines().filter(month=month)}
    revenue: dict[str, Revenue] = {}
    for r in Revenue.objects.filter(month=month).order_by("business_line", "currency"):
        revenue.setdefault(r.business_line, r)
    rows = []
    for line in sorted(
        set(plan_lines(month=month, business_lines=business_lines)) | _in_scope(budgets, business_lines)
    ):
        budget, income = budgets.get(line), revenue.get(line)
        rows.append(
            PlanRow(
                line,
                budget.amount if budget else None,
                budget.currency if budget else "",
                budget.tokens if budget else None,
                income.amount if income else None,
                income.currency if income else "",
            )
        )
    return rows


def _in_scope(rows: dict[str, Any], business_lines: list[str] | None) -> set[str]:
    return {line for line in rows if business_lines is None or line in business_lines}


def plans_save(*, month: date, rows: list[PlanRow], user: Any = None, business_lines: list[str] | None = None) -> int:
    """Write the rows that differ from what is stored, all or nothing: a budget or revenue left
    empty where one exists is removed. Returns how many rows changed. Lines outside
    `business_lines` (unless None) are refused."""
    month = month_of(month)
    _month_open_check(month, "budget")
    current = {r.business_line: r for r in plan_rows(month=month)}
    errors: dict[int, str] = {}
    changed = 0
    with transaction.atomic():
        for i, row in enumerate(rows):
            if business_lines is not None and row.business_line not in business_lines:
                errors[i] = OUTSIDE_SCOPE.format(line=row.business_line)
                continue
            try:
                changed += _row_save(month, row, current.get(row.business_line), user)
            except PlanningError as exc:
                errors[i] = str(exc)
            except ValidationError as exc:
                errors[i] = "; ".join(exc.messages)
        if errors:
            transaction.set_rollback(True)
            raise PlanRowsError(errors)
    return changed


def _row_save(month: date, row: PlanRow, stored: PlanRow | None, user: Any) -> int:
    stored = stored or PlanRow(row.business_line)
    changed = 0
    if row.budget_key() != stored.budget_key():
        _budget_replace(month, row, user)
        changed = 1
    wanted = (row.revenue_amount, row.revenue_currency if row.revenue_amount is not None else "")
    had = (stored.revenue_amount, stored.revenue_currency if stored.revenue_amount is not None else "")
    if wanted != had:
        _revenue_replace(month, row, had[1], user)
        changed = 1
    return changed


def _budget_replace(month: date, row: PlanRow, user: Any, *, hard: bool | None = None) -> None:
    """The line's budget as the row has it; a row with neither amount nor tokens removes it."""
    if row.budget_amount is None and row.budget_tokens is None:
        Budget.objects.of_lines().filter(business_line=row.business_line, month=month).delete()
        return
    budget_set(
        business_line=row.business_line,
        month=month,
        amount=row.budget_amount,
        currency=row.budget_currency,
        tokens=row.budget_tokens,
        user=user,
        hard=hard,
    )


def _revenue_replace(month: date, row: PlanRow, had_currency: str, user: Any) -> None:
    """The line's revenue in the row's currency; the row it replaces (another currency, or
    emptied) is removed, one by one so each delete is audited."""
    if had_currency and (row.revenue_amount is None or row.revenue_currency != had_currency):
        for old in Revenue.objects.filter(business_line=row.business_line, month=month, currency=had_currency):
            old.delete()
    if row.revenue_amount is not None:
        if not row.revenue_currency:
            raise PlanningError("an amount needs its currency")
        revenue_set(
            business_line=row.business_line,
            month=month,
            amount=row.revenue_amount,
            currency=row.revenue_currency,
            user=user,
        )


def plans_copy_previous(*, month: date, user: Any = None, business_lines: list[str] | None = None) -> int:
    """Copy the month before's budgets and revenue into `month` for the lines (and revenue
    currencies) that have none yet; only `business_lines` unless None. Returns how many rows
    were written."""
    month = month_of(month)
    _month_open_check(month, "budget")
    before = previous_month(month)
    copied = 0
    with transaction.atomic():
        have = set(Budget.objects.of_lines().filter(month=month).values_list("business_line", flat=True))
        for budget in Budget.objects.of_lines().filter(month=before).exclude(business_line__in=have):
            if business_lines is None or budget.business_line in business_lines:
                _budget_replace(
                    month,
                    PlanRow(budget.business_line, budget.amount, budget.currency, budget.tokens),
                    user,
                    hard=budget.hard,
                )
                copied += 1
        have_revenue = set(Revenue.objects.filter(month=month).values_list("business_line", "currency"))
        for income in Revenue.objects.filter(month=before):
            in_scope = business_lines is None or income.business_line in business_lines
            if in_scope and (income.business_line, income.currency) not in have_revenue:
                row = PlanRow(income.business_line, revenue_amount=income.amount, revenue_currency=income.currency)
                _revenue_replace(month, row, "", user)
                copied += 1
    return copied
