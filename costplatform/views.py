from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
    HttpResponseServerError,
    JsonResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext
from django.views.decorators.http import require_POST
from django.views.defaults import page_not_found

from apps.accounts.models import CollectorKey
from apps.accounts.roles import user_has_role
from apps.alerts.checks import site_url_is_local
from apps.alerts.models import Channel
from apps.common.buckets import month_of, previous_month
from apps.pricing.selectors import unpriced_models_recent
from costplatform.middleware import DISPLAY_ZONE


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Where each person starts: finance at the books, engineers at the overview and the waste,
    admins at what a new platform still needs set up."""
    user = request.user
    context = {
        "finance": user_has_role(user, "finance", "admin"),
        "engineering": user_has_role(user, "engineer", "viewer", "admin"),
        "setup": setup_checklist() if user_has_role(user, "admin") else [],
        "no_role": not user_has_role(user, "admin", "finance", "engineer", "viewer"),
        "last_month": f"{previous_month(month_of(timezone.now())):%Y-%m}",
        "this_month": f"{month_of(timezone.now()):%Y-%m}",
    }
    return render(request, "home.html", context)


@dataclass(frozen=True)
class SetupItem:
    label: str
    done: bool
    detail: str
    link: str


def setup_checklist() -> list[SetupItem]:
    """What a platform needs before its figures mean anything, read live."""
    keys = CollectorKey.objects.filter(revoked_at__isnull=True).count()
    unpriced = unpriced_models_recent()
    channels = Channel.objects.filter(disabled_at__isnull=True).count()
    local = site_url_is_local()
    return [
        SetupItem(
            _("Collector keys"),
            keys > 0,
            ngettext("%(n)d active key", "%(n)d active keys", keys) % {"n": keys},
            reverse("collectors"),
        ),
        SetupItem(
            _("Prices"),
            not unpriced,
            ngettext("%(n)d model with tokens but no price", "%(n)d models with tokens but no price", len(unpriced))
            % {"n": len(unpriced)}
            if unpriced
            else _("Every model of the last 30 days has a price or a cost pool."),
            reverse("prices"),
        ),
        SetupItem(
            _("Alert channels"),
            channels > 0,
            ngettext("%(n)d channel enabled", "%(n)d channels enabled", channels) % {"n": channels},
            reverse("alert-channels"),
        ),
        SetupItem(
            _("Site address"),
            not local,
            _("Links in alerts point at %(url)s; set COSTPLATFORM_SITE_URL to the address people open.")
            % {"url": settings.ALERTS_SITE_URL}
            if local
            else settings.ALERTS_SITE_URL,
            reverse("alert-channels"),
        ),
        SetupItem(
            _("Attribution map"),
            True,
            _(
                "Who pays is decided at the edge: each vLLM server and proxy reads a map of caller tokens to "
                "business lines (README, \u201cWriting an attribution map\u201d)."
            ),
            "",
        ),
    ]


UNKNOWN_DISPLAY_ZONE = "{name!r} is not an IANA time zone (such as Asia/Shanghai or UTC)"


@require_POST
def display_zone_set(request: HttpRequest) -> HttpResponse:
    """The zone the reader wants times shown in, kept in the session (as Django's set_language
    keeps the language); back to `next` on this site."""
    name = request.POST.get("zone", "")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return HttpResponseBadRequest(UNKNOWN_DISPLAY_ZONE.format(name=name))
    request.session[DISPLAY_ZONE] = name
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    return HttpResponseRedirect(back if safe and back else "/")


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: under /api/ a JSON answer, as the API's other errors (a path that matches no
    route, such as /api/v1/rulesets/x/try); elsewhere Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception or Http404())


def _back(request: HttpRequest) -> str:
    """The page the reader came from, when it is one of this site's (a way back from an error)."""
    came_from = request.headers.get("Referer", "")
    same_site = url_has_allowed_host_and_scheme(came_from, allowed_hosts={request.get_host()})
    return came_from if same_site and came_from != request.build_absolute_uri() else ""


# The reasons the pages give in English (PermissionDenied("…") in their views), listed for the
# translation catalogue: the 403 page shows each in the reader's language.
PAGE_REFUSALS = (
    gettext_noop("the pages need a role: admin, finance, engineer or viewer"),
    gettext_noop("the finance pages are for the finance and admin roles"),
    gettext_noop("collectors are for engineers and admins"),
    gettext_noop("the audit is for the finance, engineer and admin roles"),
    gettext_noop("trying rules is for engineers and admins"),
    gettext_noop("rules are edited by engineers and admins who see every business line"),
    gettext_noop("the alert is outside your business lines"),
    gettext_noop("the channel is outside your business lines"),
    gettext_noop("alerts are muted and acknowledged by engineers and admins"),
    gettext_noop("test messages are sent by engineers and admins"),
    gettext_noop("channels are added and changed by admins of every business line"),
    gettext_noop("this business line is outside your scope"),
    gettext_noop("setting a budget needs the finance or admin role"),
    gettext_noop("overriding a budget needs the finance or admin role"),
    gettext_noop(  # apps/accounts/scopes.COMPANY_WIDE, spelled out for the catalogue
        "This shows data of every business line; a user scoped to some business lines cannot read it "
        "(their lines are on the dashboards and /finance/)."
    ),
)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: under /api/ a JSON answer; elsewhere the site's page with the reason the view
    gave, in the reader's language, and a way back."""
    reason = str(exception or "")
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason or "Forbidden."}, status=403)
    shown = _(reason) if reason else ""
    return render(request, "403.html", {"reason": shown, "back": _back(request)}, status=403)


# When the site's layout itself fails (the database is down): a page that needs nothing.
BARE_500 = (
    "<!doctype html><title>Error · costplatform</title><h1>Something went wrong</h1>"
    "<p>The server failed to answer this page; the error is in the web log.</p><p><a href='/'>Home</a></p>"
)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the site's page, or a bare one when the layout cannot be drawn."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Server error."}, status=500)
    try:
        return render(request, "500.html", status=500)
    except Exception:  # whatever broke the page may break its layout too
        return HttpResponseServerError(BARE_500)
