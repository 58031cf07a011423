"""Template helpers of the dashboards: the shared ones of every app's pages (apps/common
templatetags/pages.py: labels, lookups, numbers) under this library's name too, and the
filters' links without a dim."""

from __future__ import annotations

from django import template

from apps.common.templatetags import pages
from apps.dashboards.filters import Filters

register = template.Library()
register.filters.update(pages.register.filters)  # `{% load dashboards %}` keeps every shared filter


@register.filter
def without_dim(flt: Filters, name: str) -> str:
    return flt.without_dim(name)
