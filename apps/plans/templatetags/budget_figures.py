"""Helpers of the budgets page's tables (templates/plans/budgets.html): a variance with its
sign, money to the cent and tokens whole."""

from __future__ import annotations

from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def signed(value: Decimal | int | None) -> str:
    """+1,234.50 or -80 (a variance always shows its sign, never colour alone)."""
    if value is None:
        return ""
    sign = "+" if value > 0 else ""  # zero shows none: on budget is neither side
    return f"{sign}{value:,.2f}" if isinstance(value, Decimal) else f"{sign}{value:,}"


@register.filter
def amount(value: Decimal | int | None) -> str:
    """Money to the cent, tokens whole, both with thousands separators."""
    if value is None:
        return ""
    return f"{value:,.2f}" if isinstance(value, Decimal) else f"{value:,}"


@register.filter
def signed_percent(value: Decimal | None) -> str:
    """A share as a signed percentage: +10.8% or -16.2%."""
    if value is None:
        return ""
    return f"{'+' if value > 0 else ''}{value:.1%}"
