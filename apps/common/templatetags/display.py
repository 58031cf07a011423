"""Times and counts as every page shows them: in the reader's display zone (chosen on the page, kept in the
session; the accounting zone until then), without microseconds, with the zone named once. A
template builtin (settings.TEMPLATES), so no page formats an instant its own way."""

from __future__ import annotations

from datetime import date, datetime

from django import template
from django.utils import timezone

from apps.common.buckets import display_zone_choices
from apps.common.formats import int_text, when_text

register = template.Library()


@register.filter
def when(value: date | datetime | None, precision: str = "") -> str:
    """An instant in the display zone: YYYY-MM-DD HH:MM, or HH:MM:SS with `when:"s"`; a day as is."""
    return when_text(value, timezone.get_current_timezone(), seconds=precision == "s")


@register.filter
def number(value: int | None) -> str:
    """A count with thousands separators (apps.common.formats), on every page alike."""
    return int_text(value)


@register.simple_tag
def display_zone() -> str:
    """The name of the zone the page's times are shown in."""
    return str(timezone.get_current_timezone_name())


@register.simple_tag
def display_zones() -> list[str]:
    """The zones the page's zone switch offers, the current one among them."""
    return display_zone_choices(timezone.get_current_timezone_name())
