"""Budgets and revenue per business line and month, set by finance. Those of a closed month
are its books: changing them needs the month reopened (admin, with a reason)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import transaction

from apps.common.buckets import month_of
from apps.ledger.models import CLOSED_MONTH, Budget, Period, Revenue

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
) -> Budget:
    """Set (create or replace) a business line's budget for a month."""
    if amount is None and tokens is None:
        raise PlanningError(BUDGET_EMPTY)
    if amount is not None and not currency:
        raise PlanningError("an amount needs its currency")
    _month_open_check(month, "budget")
    with transaction.atomic():
        budget = Budget.objects.select_for_update().filter(business_line=business_line, month=month_of(month)).first()
        budget = budget or Budget(business_line=business_line, month=month_of(month))
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
