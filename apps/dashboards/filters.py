"""The filters every dashboard page reads from and carries along in its links: a time range
(a rolling window, a calendar preset of the accounting zone, or from/to dates), any dim, and the
drill-down position (class, reason, model, breakdown dim)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import Http404, HttpRequest
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext_lazy as _

from apps.classification.engine import CLASSES
from apps.common.buckets import (
    accounting_zone,
    day_end,
    day_of,
    day_start,
    hour_floor,
    iso_local,
    month_end,
    month_of,
    month_start,
    previous_month,
)

# Rolling windows: back from the next whole hour.
RANGES = {
    "24h": (timedelta(days=1), _("Last 24 hours")),
    "7d": (timedelta(days=7), _("Last 7 days")),
    "30d": (timedelta(days=30), _("Last 30 days")),
    "90d": (timedelta(days=90), _("Last 90 days")),
}
# Calendar presets: days and months of the accounting zone, as the books count them.
PRESETS = {
    "today": _("Today"),
    "this-month": _("This month"),
    "last-month": _("Last month"),
    "mtd": _("Month to date"),
}
CUSTOM = "custom"  # the from/to dates of the form
DEFAULT_RANGE = "7d"
NO_CUSTOM_DATES = "a custom range needs its from date (YYYY-MM-DD; to defaults to from)"
# The breakdown dims of the drill-down, in the order a click walks them.
BREAKDOWN = ("business_line", "feature", "step")
# What the waste page groups by across every reason (`group`): any rollup dim, the model, the
# reason, the conversation (a dim of the records, not rolled up).
ACROSS = ("model", "reason", "conversation")


@dataclass(frozen=True)
class Filters:
    start: datetime
    end: datetime
    range: str = DEFAULT_RANGE  # a RANGES or PRESETS key, or "" when from/to are given
    dims: dict[str, str] = field(default_factory=dict)
    token_class: str = ""
    reason: str = ""
    model: str = ""
    by: str = BREAKDOWN[0]
    group: str = ""  # a rollup dim, "model" or "reason": one table across the chosen class's reasons

    @property
    def granularity(self) -> str:
        return "hour" if self.end - self.start <= timedelta(days=2) else "day"

    def params(self) -> dict[str, str]:
        found: dict[str, str] = {}
        if self.range:
            found["range"] = self.range
        elif self.start != day_start(day_of(self.start)) or self.end != day_start(day_of(self.end)):
            found["from"], found["to"] = iso_local(self.start), iso_local(self.end)  # hours (an alert's window)
        else:
            found["from"] = f"{day_of(self.start):%Y-%m-%d}"
            found["to"] = f"{day_of(self.end) - timedelta(days=1):%Y-%m-%d}"
        found.update({f"dims.{name}": value for name, value in sorted(self.dims.items())})
        for name, value in (("class", self.token_class), ("reason", self.reason), ("model", self.model)):
            if value:
                found[name] = value
        if self.by != BREAKDOWN[0]:
            found["by"] = self.by
        if self.group:
            found["group"] = self.group
        return found

    def query(self, **changes: Any) -> str:
        """`?...` of these filters with `changes` applied (dims given as dims={name: value})."""
        dims = changes.pop("dims", None)
        changed = replace(self, **changes)
        if dims is not None:
            changed = replace(changed, dims={**self.dims, **dims})
        return "?" + urlencode(changed.params())

    def without_dim(self, name: str) -> str:
        return replace(self, dims={k: v for k, v in self.dims.items() if k != name}).query()


def _hours(first: str, last: str) -> tuple[datetime, datetime]:
    """from/to as instants ('2026-11-30T10:00+08:00', to exclusive), to the hour of the rollups:
    the window of an alert. Without an offset they are read in the accounting zone."""
    # A "+" of an offset typed into the address bar arrives as a space.
    start, end = parse_datetime(first.replace(" ", "+")), parse_datetime(last.replace(" ", "+"))
    if start is None or end is None:
        raise Http404("from and to are both dates (YYYY-MM-DD) or both instants (YYYY-MM-DDTHH:MM+HH:MM)")
    start, end = (t if t.tzinfo else t.replace(tzinfo=accounting_zone()) for t in (start, end))
    start, end = hour_floor(start), hour_floor(end - timedelta(microseconds=1)) + timedelta(hours=1)
    if end <= start:
        raise Http404("from is before to")
    return start, end


def preset_window(key: str, now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of a calendar preset at `now`: today and this month whole (the hours still
    to come are empty), last month whole, month to date up to the next whole hour."""
    today, month = day_of(now), month_of(now)
    if key == "today":
        return day_start(today), day_end(today)
    if key == "this-month":
        return month_start(month), month_end(month)
    if key == "last-month":
        return month_start(previous_month(month)), month_start(month)
    return month_start(month), hour_floor(now) + timedelta(hours=1)


def _window(get: Any, now: datetime) -> tuple[str, datetime, datetime]:
    """(range key or "", start, end) of the query: a chosen rolling or calendar range wins over
    from/to (the form sends both), from/to alone or with `custom` are dates or instants."""
    chosen = get.get("range", "")
    if chosen in PRESETS:
        return (chosen, *preset_window(chosen, now))
    if chosen in RANGES or not (get.get("from") or chosen == CUSTOM):
        chosen = chosen if chosen in RANGES else DEFAULT_RANGE
        end = hour_floor(now) + timedelta(hours=1)
        start = end - RANGES[chosen][0]
        if end - start > timedelta(days=2):  # drawn by the day: whole accounting days, the first one included
            start = day_start(day_of(start))
        return chosen, start, end
    if not get.get("from"):
        raise Http404(NO_CUSTOM_DATES)
    try:
        return ("", *_custom(get["from"], get.get("to", "")))
    except (ValueError, OverflowError) as exc:  # 2026-13-45, an offset of +99:00, the year 9999's last hour
        raise Http404(f"from and to are no window of the calendar: {exc}") from None


def _custom(first: str, last: str) -> tuple[datetime, datetime]:
    if "T" in first:
        return _hours(first, last)
    start, end = parse_date(first), parse_date(last or first)
    if start is None or end is None or end < start:
        raise Http404("from and to are dates (YYYY-MM-DD), from <= to")
    return day_start(start), day_end(end)  # days of the accounting zone


def filters_from(request: HttpRequest, *, now: datetime | None = None) -> Filters:
    """The filters of a request; unknown values are a 404 rather than a silently empty page."""
    get = request.GET
    chosen, start, end = _window(get, now or datetime.now(UTC))
    dims = {k[5:]: v for k, v in get.items() if k.startswith("dims.") and k[5:] in settings.ROLLUP_DIMS and v}
    reason = get.get("reason", "")
    token_class = reason.split(".", 1)[0] if reason else get.get("class", "")
    by = get.get("by", BREAKDOWN[0])
    group = get.get("group", "")
    if (token_class and token_class not in CLASSES) or by not in BREAKDOWN or (group and group not in groups()):
        raise Http404("unknown class, breakdown or group")
    return Filters(start, end, chosen, dims, token_class, reason, get.get("model", ""), by, group)


def groups() -> tuple[str, ...]:
    """What the waste page may group by: the rollup dims, then the model and the reason."""
    return (*settings.ROLLUP_DIMS, *ACROSS)
