"""The alerts pages, outside the admin: the history of alerts with their delivery state
(scoped by business line) and the channels (kind, enabled or why disabled, last deliveries) with a
"send a test message" button for engineers and admins (the admin action's service), and the
page behind the signed mute / acknowledge links of a message (confirm, then act)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import get_language, gettext_lazy, pgettext_lazy
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.roles import READERS, reader_required, user_has_role
from apps.accounts.scopes import business_lines_of, sees_all_lines
from apps.alerts.actions import ACTORS, LABELS, ActionLinkError, action_read
from apps.alerts.admin import ChannelForm, redacted
from apps.alerts.checks import site_url_is_local
from apps.alerts.messages import SEVERITY, alert_page_link, message_for
from apps.alerts.models import Alert, AlertAction, Channel, Notification, Severity
from apps.alerts.preview import CHANNEL_KINDS, channel_previews
from apps.alerts.services import (
    ERR_NOT_FUTURE,
    WEB_ACTIONS,
    AlreadyDone,
    alert_act,
    alert_action_done,
    alert_subject_act,
    channel_save,
    channel_send_test,
)
from apps.alerts.web import may_act, standings

TESTERS = ("admin", "engineer")
# The history's words for an alert's kind (its detector, or a broadcast's kind), status and why
# it was not sent, in the reader's language (severity: the messages' own words); an unknown kind
# shows as stored.
KIND_NAMES = {
    "spike": gettext_lazy("Token spike"),
    "trend": gettext_lazy("Unit cost rising"),
    "budget": gettext_lazy("Budget"),
    "health": gettext_lazy("Token health"),
    "unattributed": gettext_lazy("Unattributed tokens"),
    "dead_letters": gettext_lazy("Rejected records"),
    "collector_silent": gettext_lazy("Collector silent"),
    "ledger_finding": gettext_lazy("Month-end check"),
    "audit": gettext_lazy("Monthly audit"),
    "test": gettext_lazy("Test message"),
}
STATUS_NAMES = {
    Alert.Status.FIRING: gettext_lazy("firing"),
    Alert.Status.RESOLVED: gettext_lazy("resolved"),
    Alert.Status.EVENT: gettext_lazy("event"),
}
NOT_SENT = {"muted": gettext_lazy("muted"), "no route": gettext_lazy("no channel takes it")}
DELIVERY_NAMES = {
    Notification.Status.QUEUED: pgettext_lazy("delivery", "queued"),
    Notification.Status.SENDING: pgettext_lazy("delivery", "sending"),
    Notification.Status.SENT: pgettext_lazy("delivery", "sent"),
    Notification.Status.FAILED: pgettext_lazy("delivery", "failed"),
}
HISTORY = 200
LAST_DELIVERIES = 5


@reader_required
def alerts(request: HttpRequest) -> HttpResponse:
    """The latest alerts, newest first, each with the title its message had and how many
    deliveries were sent and failed; a scoped user sees only alerts of its business lines
    (broadcasts and tests have none)."""
    found = Alert.objects.prefetch_related("actions__user").annotate(
        sent=Count("notifications", filter=Q(notifications__status=Notification.Status.SENT)),
        failed=Count("notifications", filter=Q(notifications__status=Notification.Status.FAILED)),
        pending=Count(
            "notifications",
            filter=Q(notifications__status__in=[Notification.Status.QUEUED, Notification.Status.SENDING]),
        ),
    )
    lines = business_lines_of(request.user)
    if lines is not None:
        found = found.filter(business_line__in=lines)
    status = request.GET.get("status", "")
    if status in Alert.Status.values:
        found = found.filter(status=status)
    shown = list(found.order_by("-created_at", "-id")[:HISTORY])
    language = _language()
    standing = standings(shown, request.user)
    for alert in shown:  # what the chat message said, in the page's language, not the stored subject key
        alert.standing = standing[alert.id]  # type: ignore[attr-defined]
        alert.page_link = alert_page_link(alert)  # type: ignore[attr-defined]
        alert.message_title = message_for(alert, language).title  # type: ignore[attr-defined]
        alert.kind_name = KIND_NAMES.get(alert.kind, alert.kind)  # type: ignore[attr-defined]
        alert.status_name = STATUS_NAMES.get(alert.status, alert.status)  # type: ignore[attr-defined]
        alert.severity_name = SEVERITY[language][Severity(alert.severity)]  # type: ignore[attr-defined]
        alert.not_sent = NOT_SENT.get(alert.suppressed, alert.suppressed)  # type: ignore[attr-defined]
    statuses = [(value, STATUS_NAMES[value]) for value in Alert.Status.values]
    context = {"alerts": shown, "status": status, "statuses": statuses}
    return render(request, "alerts/history.html", context)


@require_POST
@login_required
def alert_act_web(request: HttpRequest, alert_id: int) -> HttpResponse:
    """Acknowledge, mute (1 h, 24 h, until a time) or unmute the (rule, subject) of an alert from
    /alerts/ or the page the alert opened; back to `next` (that page) with what was done."""
    if not user_has_role(request.user, *READERS) or not user_has_role(request.user, *ACTORS):
        raise PermissionDenied("alerts are muted and acknowledged by engineers and admins")
    alert = get_object_or_404(Alert.objects.select_related("rule"), id=alert_id)
    if not may_act(request.user, alert):
        raise PermissionDenied("the alert is outside your business lines")
    action = request.POST.get("action", "")
    if action not in WEB_ACTIONS:
        return _refused(request, _("This action is not known."), 400)
    until = None
    if action == AlertAction.Action.MUTE_UNTIL:
        typed = parse_datetime(request.POST.get("until", ""))  # a datetime-local field: the display zone
        until = timezone.make_aware(typed) if typed is not None and timezone.is_naive(typed) else typed
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=False):
        back = reverse("alerts")
    try:
        done = alert_subject_act(
            alert=alert, action=action, user=request.user, until=until, rule_too=sees_all_lines(request.user)
        )
    except AlreadyDone as exc:
        messages.info(request, _("Already acknowledged by %(who)s.") % {"who": _who(exc.done)})
        return redirect(back)
    except ValueError as exc:
        text = _("Choose a time in the future.") if str(exc) == ERR_NOT_FUTURE else _("This alert has no rule to mute.")
        messages.error(request, text)
        return redirect(back)
    messages.success(request, _done_text(alert, done))
    return redirect(back)


def _who(done: AlertAction) -> str:
    return done.user.username if done.user else "-"


def _done_text(alert: Alert, done: AlertAction) -> str:
    subject = alert.subject or (alert.rule.name if alert.rule else "")
    if done.action == AlertAction.Action.ACKNOWLEDGE:
        return _("Alert acknowledged.")
    if done.action == AlertAction.Action.UNMUTE:
        return _("%(subject)s is no longer muted.") % {"subject": subject}
    until = timezone.localtime(done.muted_until) if done.muted_until else None
    return _("%(subject)s is muted until %(until)s (%(zone)s).") % {
        "subject": subject,
        "until": f"{until:%Y-%m-%d %H:%M}" if until else "-",
        "zone": timezone.get_current_timezone_name(),
    }


def _visible_channels(user: Any) -> list[Channel]:
    lines = business_lines_of(user)
    channels = list(Channel.objects.all())
    if lines is None:
        return channels
    return [c for c in channels if not c.business_lines or set(c.business_lines) & set(lines)]


@reader_required
def channels(request: HttpRequest) -> HttpResponse:
    """Every channel (a scoped user: those routing its lines) with its state and its latest
    deliveries (a scoped user: of its lines' alerts only)."""
    shown = _visible_channels(request.user)
    lines = business_lines_of(request.user)
    recent = Notification.objects.select_related("alert").order_by("-id")
    if lines is not None:
        recent = recent.filter(alert__business_line__in=lines)
    rows: list[dict[str, Any]] = [
        {
            "channel": c,
            "endpoint": c.email_to if c.kind == Channel.Kind.EMAIL else redacted(c.url),
            "deliveries": list(recent.filter(channel=c)[:LAST_DELIVERIES]),
        }
        for c in shown
    ]
    language = _language()
    for row in rows:  # kinds, severities and states in the page's language
        channel = row["channel"]
        channel.kind_name = CHANNEL_KINDS.get(channel.kind, channel.kind)
        channel.severity_name = SEVERITY[language][Severity(channel.min_severity)]
        for sent in row["deliveries"]:
            sent.kind_name = KIND_NAMES.get(sent.alert.kind, sent.alert.kind)
            sent.status_name = DELIVERY_NAMES.get(sent.status, sent.status)
    context = {
        "rows": rows,
        "can_test": user_has_role(request.user, *TESTERS),
        "can_edit": _may_edit(request.user),
        "previews": channel_previews(language=_language()),
        "site_url_local": site_url_is_local(),
        "site_url": settings.ALERTS_SITE_URL,
    }
    return render(request, "alerts/channels.html", context)


@require_POST
@login_required
def channel_test(request: HttpRequest, channel_id: int) -> HttpResponse:
    if not user_has_role(request.user, *READERS) or not user_has_role(request.user, *TESTERS):
        raise PermissionDenied("test messages are sent by engineers and admins")
    channel = get_object_or_404(Channel, id=channel_id)
    if channel not in _visible_channels(request.user):
        raise PermissionDenied("the channel is outside your business lines")
    channel_send_test(channel=channel)
    messages.success(request, _("Queued a test message to %(name)s.") % {"name": channel.name})
    return redirect("alert-channels")


def _may_edit(user: Any) -> bool:
    # A channel may serve several lines: only an admin of every line adds or changes one.
    return user_has_role(user, "admin") and sees_all_lines(user)


@require_http_methods(["GET", "POST"])
@login_required
def channel_edit(request: HttpRequest, channel_id: int | None = None) -> HttpResponse:
    """Add a channel, or change one (URL and secret are write-only: left empty, they are kept)."""
    if not _may_edit(request.user):
        raise PermissionDenied("channels are added and changed by admins of every business line")
    channel = get_object_or_404(Channel, id=channel_id) if channel_id is not None else None
    form = ChannelForm(request.POST or None, instance=channel)
    if request.method == "POST" and form.is_valid():
        saved = channel_save(form=form)
        messages.success(request, _("Saved the channel %(name)s.") % {"name": saved.name})
        return redirect("alert-channels")
    return render(request, "alerts/channel_form.html", {"form": form, "channel": channel})


def _language() -> str:
    return "zh-hans" if (get_language() or "").lower().startswith("zh") else "en"


def _refused(request: HttpRequest, error: str, status: int) -> HttpResponse:
    return render(request, "alerts/action.html", {"error": error}, status=status)


def _used(request: HttpRequest, done: AlertAction) -> HttpResponse:
    """A link acts once: the answer to its second use says who used it, when, and for what."""
    text = _("This link was already used: %(who)s, %(when)s UTC, %(what)s.") % {
        "who": done.user.username if done.user else "-",
        "when": f"{done.at:%Y-%m-%d %H:%M}",
        "what": done.get_action_display(),
    }
    if done.muted_until is not None:
        text += " " + _("Muted until %(until)s UTC.") % {"until": f"{done.muted_until:%Y-%m-%d %H:%M}"}
    return _refused(request, text, 409)


@require_http_methods(["GET", "POST"])
@login_required
def alert_action(request: HttpRequest, token: str) -> HttpResponse:
    """A signed link from a message: GET shows what it will do, POST does it."""
    if not user_has_role(request.user, *READERS) or not user_has_role(request.user, *ACTORS):
        raise PermissionDenied("alerts are muted and acknowledged by engineers and admins")
    try:
        wanted = action_read(token)
    except ActionLinkError as exc:
        expired = _("This link has expired: use the links of a newer message, or mute the rule in the admin.")
        return _refused(request, expired if exc.expired else _("This link is not valid."), 400)
    alert = Alert.objects.select_related("rule").filter(id=wanted.alert_id).first()
    if alert is None:
        return _refused(request, _("This alert no longer exists."), 404)
    lines = business_lines_of(request.user)
    if lines is not None and alert.business_line not in lines:
        raise PermissionDenied("the alert is outside your business lines")
    language = _language()
    label = LABELS[language][wanted.action]
    earlier = alert_action_done(alert=alert, action=wanted.action)
    if earlier is not None:
        return _used(request, earlier)
    if request.method == "POST":
        try:
            # A user scoped to some lines mutes the alert's subject only, not a rule of other lines too.
            done = alert_act(alert=alert, action=wanted.action, user=request.user, whole_rule=lines is None)
        except AlreadyDone as exc:
            return _used(request, exc.done)
        except ValueError:
            return _refused(request, _("This alert has no rule to mute."), 400)
        if done.muted_until is not None:
            text = _("%(rule)s is muted until %(until)s UTC.") % {
                "rule": alert.rule.name if alert.rule else "",
                "until": f"{done.muted_until:%Y-%m-%d %H:%M}",
            }
        else:
            text = _("Alert acknowledged.")
        messages.success(request, text)
        return redirect("alerts")
    context = {"alert": alert, "message": message_for(alert, language), "label": label, "history": alert.actions.all()}
    return render(request, "alerts/action.html", context)
