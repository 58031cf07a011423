"""Small template helpers the pages of every app share (`{% load pages %}`): a key as the
reader names it, dict lookup, token counts, ratios and money."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

from apps.common import labels

register = template.Library()


@register.filter
def label(key: str) -> str:
    """A dim or field key as the reader names it (apps/common/labels.py)."""
    return labels.label(key)


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key, "")


@register.filter
def tokens(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


@register.filter
def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


@register.filter
def money(value: Decimal | None) -> str:
    return "" if value is None else f"{value:,.2f}"


@register.filter
def small_money(value: Decimal | None) -> str:
    """The cost of one request: six decimals, the precision prices per million reach."""
    return "" if value is None else f"{value:,.6f}"
