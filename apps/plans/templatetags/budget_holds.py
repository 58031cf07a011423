"""`{% budget_holds %}`: the hard-budget partial of the budgets page (apps/plans/pages/holds.py),
so the page that includes it needs no context of its own for it."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django import template

from apps.common.formats import int_text, money_text
from apps.plans.budget_state import BudgetState
from apps.plans.pages.holds import holds_context, state_label

register = template.Library()


@register.inclusion_tag("plans/_budget_holds.html", takes_context=True)
def budget_holds(context: template.Context) -> dict[str, Any]:
    passed = {name: context.get(name) for name in ("request", "csrf_token", "messages")}
    return {**holds_context(context["request"], now=datetime.now(UTC)), **passed}


@register.filter
def hold_state(state: BudgetState) -> str:
    return state_label(state)


@register.filter
def count(value: int | None) -> str:
    return int_text(value)


@register.filter
def amount(value: Decimal | None) -> str:
    return money_text(value)
