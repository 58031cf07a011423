"""Small template helpers the pages of every app share (`{% load pages %}`): a key as the
reader names it, dict lookup, token counts, ratios and money."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template
from django.utils.html import format_html_join

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


@register.simple_tag
def figure(name: str, value: Any, currency: str = "", scope: str = "") -> str:
    """The attributes that mark a headline figure for the reader's tools and the cross-surface
    tests (docs/dashboards.md, "Figures"): `data-figure` names it, `data-value` is its exact
    value (a ratio as a fraction 0-1, money in the currency's units, tokens as an integer),
    `data-currency` the money's currency, `data-scope` what part of the figure it is (a business
    line, "idle", ...). Empty when there is no value."""
    if value is None or value == "":
        return ""
    if isinstance(value, Decimal):
        exact = format(value, "f")
    else:
        exact = repr(value) if isinstance(value, float) else str(value)
    attrs = [("data-figure", name), ("data-value", exact)]
    if currency:
        attrs.append(("data-currency", currency))
    if scope:
        attrs.append(("data-scope", scope))
    return format_html_join(" ", '{}="{}"', attrs)


@register.inclusion_tag("common/spend.html")
def spend_figure(spent: Any) -> dict[str, Any]:
    """Spend and its parts (a Spend of apps/ledger/figures.py), marked as figures, the same on every
    page that shows it: the total, the tokens' cost, idle capacity and its share, unassigned tokens,
    what is pending and what waits for an exchange rate."""
    return {"spent": spent}
