"""Template helpers of the dashboards: the shared ones of every app's pages (apps/common
templatetags/pages.py: labels, lookups, numbers) under this library's name too, and the
filters' links without a dim."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from apps.common.templatetags import pages
from apps.dashboards.filters import Filters
from apps.dashboards.tables import SORT, Sort, query_with

register = template.Library()
register.filters.update(pages.register.filters)  # `{% load dashboards %}` keeps every shared filter


@register.filter
def without_dim(flt: Filters, name: str) -> str:
    return flt.without_dim(name)


@register.simple_tag(takes_context=True)
def sort_th(context: Any, key: str, title: str, kind: str = "number", sort: Sort | None = None) -> str:
    """A sortable header: a link to the page sorted by this column (the other way round when it is
    the column sorted by; numbers start from the largest, text from A), marked with aria-sort.
    `sort` is the table's sort where the page has several tables (the page's `sort` otherwise)."""
    current: Sort | None = sort if sort is not None else context.get("sort")
    on = current is not None and current.key == key
    desc = not current.desc if on and current is not None else kind != "text"
    param = current.name if current is not None else SORT
    href = query_with(context["request"], **{param: ("-" if desc else "") + key})
    state = ("descending" if current.desc else "ascending") if on and current is not None else "none"
    arrow = ("▼" if current.desc else "▲") if on and current is not None else ""
    css = "text" if kind in ("text", "when") else ""  # times align as words, and start from the newest
    return format_html(
        '<th class="{}" data-sort="{}" aria-sort="{}"><a href="{}">{}</a>{}</th>', css, key, state, href, title, arrow
    )


@register.simple_tag(takes_context=True)
def download_links(context: Any, table: str) -> str:
    """CSV and XLSX links of a table: the page's query (filters, sort, search) and the download."""
    request = context["request"]
    links = [
        format_html(
            '<a href="{}" data-download="{}-{}">{}</a>',
            query_with(request, download=table, format=fmt),
            table,
            fmt,
            fmt.upper(),
        )
        for fmt in ("csv", "xlsx")
    ]
    return format_html('<p class="downloads note">{} {}</p>', _("Download:"), mark_safe(" · ".join(links)))
