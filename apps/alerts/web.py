"""On-call in the web: who may act on an alert from /alerts/ and from the page the alert opens,
what an alert's (rule, subject) stands at (acknowledged, muted until when), and the banner of
the page an alert opens (`?alert=<id>` in its link): the alert named, its window marked on the
page's charts, and its actions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

from django.http import HttpRequest
from django.utils.dateparse import parse_datetime

from apps.accounts.roles import READERS, user_has_role
from apps.accounts.scopes import business_lines_of
from apps.alerts.actions import ACTORS
from apps.alerts.messages import OPENED, message_for
from apps.alerts.models import Alert, AlertAction
from apps.alerts.services import subject_muted_until
from apps.common.buckets import accounting_zone

HOUR = timedelta(hours=1)


def alert_window(alert: Alert) -> tuple[datetime, datetime] | None:
    """The window the alert's figures are of: the detector's own, else the from/to of its link."""
    query = parse_qs(urlsplit(alert.link).query)
    found = alert.figures.get("_window") or [*query.get("from", [])[:1], *query.get("to", [])[:1]]
    if len(found) != 2:
        return None
    start, end = (parse_datetime(str(at)) for at in found)
    if start is None or end is None or start.tzinfo is None or end.tzinfo is None:
        return None
    return start, end


def may_act(user: Any, alert: Alert) -> bool:
    """The signed links' rule: an engineer or admin, of the alert's business line when scoped."""
    if not user_has_role(user, *READERS) or not user_has_role(user, *ACTORS):
        return False
    lines = business_lines_of(user)
    return lines is None or alert.business_line in lines


def may_see(user: Any, alert: Alert) -> bool:
    lines = business_lines_of(user)
    return user_has_role(user, *READERS) and (lines is None or alert.business_line in lines)


@dataclass(frozen=True)
class Standing:
    """Where an alert's (rule, subject) stands for the web's buttons."""

    can_act: bool
    mutable: bool  # a rule's alert: its subject can be muted
    muted_until: datetime | None
    acknowledged: AlertAction | None


def standings(alerts: list[Alert], user: Any) -> dict[int, Standing]:
    muted = subject_muted_until(alerts)
    found = {}
    for alert in alerts:
        acked = [done for done in alert.actions.all() if done.action == AlertAction.Action.ACKNOWLEDGE]
        found[alert.id] = Standing(
            can_act=may_act(user, alert),
            mutable=alert.rule_id is not None,
            muted_until=muted.get(alert.id),
            acknowledged=acked[-1] if acked else None,
        )
    return found


def opened_alert(request: HttpRequest, language: str) -> dict[str, Any]:
    """`opened_alert` for the page an alert opened (`?alert=<id>`), where the reader may see the
    alert: the alert, its message's title, its window (in the accounting zone's wall time, as the
    charts draw time) and its standing."""
    wanted = request.GET.get(OPENED, "")
    user = getattr(request, "user", None)
    if not wanted.isdigit() or user is None or not user.is_authenticated:
        return {}
    alert = Alert.objects.select_related("rule").prefetch_related("actions__user").filter(id=int(wanted)).first()
    if alert is None or not may_see(user, alert):
        return {}
    window = alert_window(alert)
    zone = accounting_zone()
    drawn = [f"{at:%Y-%m-%d %H:%M:%S}" for at in _wall(window, zone)] if window else []
    return {
        "opened_alert": {
            "alert": alert,
            "title": message_for(alert, language).title,
            "window": window,
            "drawn": drawn,
            "standing": standings([alert], user)[alert.id],
            "history": list(alert.actions.all())[:3],
        }
    }


def _wall(window: tuple[datetime, datetime], zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The window in the wall time the charts draw, its end as the end of its last hour's bar: on a
    night the clocks go forward the hour before the change ends at 03:00 by the clock, an hour
    after its bar's 01:00; drawn, it ends at 02:00, where the bars of the hours stand."""
    start, end = window
    last = (end - HOUR).astimezone(zone).replace(tzinfo=None) if end - start >= HOUR else None
    first = start.astimezone(zone).replace(tzinfo=None)
    return first, (last + HOUR if last is not None else end.astimezone(zone).replace(tzinfo=None))
