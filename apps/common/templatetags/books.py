"""Template helpers of the books' tables (the finance, journal and reconciliation pages): a table
of apps.common.tables.Table with the books' style (`books_style`, `books_table`), a cell formatted
by its column's kind, with its state class (neg, zero, none) and its drill-through link."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template
from django.utils.html import format_html

from apps.common.formats import cell_text, judged, money_text, pct_text, state_of
from apps.common.tables import Column, Table

register = template.Library()


@register.inclusion_tag("common/books_style.html")
def books_style() -> dict[str, Any]:
    """The books' page style: wide main, bars, sections, the tables' cells by kind and state."""
    return {}


@register.inclusion_tag("common/books_table.html")
def books_table(table: Table) -> dict[str, Any]:
    """A Table as the books show it: a header of its labels, each cell by `cell`."""
    return {"table": table}


@register.simple_tag
def cell(table: Table, index: int, row: dict[str, Any], column: Column) -> str:
    """`<td>` of a row's value: formatted, classed by kind and state, linked when the table has
    a link for it."""
    value = row.get(column.key)
    if column.nature and isinstance(value, Decimal):
        return _variance_cell(value, column)
    classes = " ".join(c for c in (column.kind, state_of(value) if column.kind != "text" else "") if c)
    text = cell_text(value, column.kind)
    href = table.links.get((index, column.key))
    if href:
        return format_html('<td class="{}"><a href="{}">{}</a></td>', classes, href, text)
    return format_html('<td class="{}">{}</td>', classes, text)


def _variance_cell(value: Decimal, column: Column) -> str:
    """A variance coloured by whether its side is favourable for the budget's nature (green
    under an expense budget, red over it) and never by colour alone: its sign and a word too."""
    found = judged(value, nature=column.nature)
    return format_html(
        '<td class="{} variance {}" data-side="{}">{} <span class="side">{}</span></td>',
        column.kind,
        found.tone,
        found.side,
        cell_text(value, column.kind),
        found.word,
    )


@register.filter
def money(value: Any) -> str:
    return money_text(value)


@register.filter
def pct(value: Any) -> str:
    return pct_text(value)


@register.filter
def state(value: Any) -> str:
    return state_of(value)
