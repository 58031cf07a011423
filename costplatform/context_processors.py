"""Template context every page shares."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from apps.accounts.roles import READERS, user_has_role
from costplatform.nav import nav_links


def data_age(request: HttpRequest) -> dict[str, int]:
    """`data_age`: the seconds the replica a page read from was behind the primary, when at least
    REPLICA_NOTICE_SECONDS (the base template then says the figures are that old)."""
    reads = getattr(request, "replica_reads", None)
    if reads is None or not reads.used or reads.lag < settings.REPLICA_NOTICE_SECONDS:
        return {}
    return {"data_age": round(reads.lag)}


def nav(request: HttpRequest) -> dict[str, object]:
    """`nav`: the header's links the reader may open (costplatform/nav.py); `reads_pages`: the
    reader has a role, so the footer's link to what the figures mean opens."""
    user = getattr(request, "user", None)
    return {"nav": nav_links(user, request.path), "reads_pages": user_has_role(user, *READERS)}


def opened_alert(request: HttpRequest) -> dict[str, object]:
    """`opened_alert`: on a page an alert's link opened (`?alert=<id>`), the alert for the banner
    that names it, marks its window on the charts and offers its actions (apps/alerts/web.py)."""
    if "alert" not in request.GET:
        return {}
    from django.utils.translation import get_language

    from apps.alerts.web import opened_alert as found

    language = "zh-hans" if (get_language() or "").lower().startswith("zh") else "en"
    return found(request, language)


def scope_notice(request: HttpRequest) -> dict[str, object]:
    """`scope_unknown`: the business lines the reader's single sign-on claim named that the
    platform does not know (apps.accounts.sso.scope_unknown_note), for the notice every page shows."""
    from apps.accounts.sso import SCOPE_UNKNOWN

    session = getattr(request, "session", None)
    found = session.get(SCOPE_UNKNOWN) if session is not None else None
    return {"scope_unknown": found} if found else {}
