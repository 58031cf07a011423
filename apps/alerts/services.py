"""Writes of alerts: routing an alert to channels, broadcasting, delivering one attempt,
and the channel actions (send a test, disable, enable).

Delivery follows the outbox pattern: the Alert row is written by evaluation (or broadcast);
routing writes one queued Notification per channel in the same transaction and enqueues
its delivery on commit. A delivery attempt claims its row, sends outside any transaction,
then records the outcome; a retry is a new Notification row (attempt + 1).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.alerts.messages import message_for
from apps.alerts.models import Alert, AlertAction, AlertState, Channel, Notification, Rule, Severity
from apps.alerts.transports import TransportError, transport_class

log = logging.getLogger(__name__)

ERR_UNKNOWN_SEVERITY = "severity must be one of info, warning, critical"
ERR_SECRETS_UNREADABLE = "the channel's URL or secret cannot be decrypted (SECRET_KEY changed?): enter them again"


def _enqueue(notification: Notification) -> None:
    from apps.alerts.tasks import notification_send

    transaction.on_commit(lambda: notification_send.delay(notification.id))


def channels_for(*, business_line: str, severity: int) -> list[Channel]:
    """Enabled channels routed this alert: its business line (or all lines) and its severity."""
    lines = (
        Q(business_lines=[]) | Q(business_lines__contains=[business_line]) if business_line else Q(business_lines=[])
    )
    return list(Channel.objects.filter(lines, disabled_at__isnull=True, min_severity__lte=severity))


def alert_route(*, alert: Alert, now: datetime | None = None) -> list[Notification]:
    """Queue the alert for every channel routed to it. Call inside the transaction that wrote
    the alert; deliveries start once it commits. Quiet hours delay non-critical alerts."""
    now = now or timezone.now()
    created = []
    for channel in channels_for(business_line=alert.business_line, severity=alert.severity):
        quiet_end = channel.quiet_until(now) if alert.severity < Severity.CRITICAL else None
        notification = Notification.objects.create(alert=alert, channel=channel, due_at=quiet_end or now)
        if quiet_end is None:  # deferred ones are picked up by the notifications-due sweep
            _enqueue(notification)
        created.append(notification)
    if not created and not alert.suppressed:
        Alert.objects.filter(id=alert.id).update(suppressed="no route")
    return created


def _severity(value: str | int) -> int:
    if isinstance(value, int) and value in Severity.values:
        return value
    for number, label in Severity.choices:
        if label == value:
            return int(number)
    raise ValueError(ERR_UNKNOWN_SEVERITY)


@transaction.atomic
def broadcast(
    *,
    title: str,
    body_markdown: str,
    link: str,
    business_line: str | None,
    severity: str,
    kind: str,
    translations: dict[str, tuple[str, str]] | None = None,
) -> list[Notification]:
    """Send a ready-made message (e.g. the monthly audit summary) to the channels routed to
    `business_line` (None: the channels that take every line) at `severity` ("info",
    "warning" or "critical"). Returns the queued notifications, one per channel; they are
    delivered by the same task as alerts, with the same retries, once the caller's
    transaction commits.

    The message is sent as given to channels of a language without an entry in
    `translations` ({"zh-hans": (title, body_markdown)}); the others get their entry.
    `body_markdown` is plain markdown (bold, lists, links); every provider gets it in its
    native card/markdown, Slack's mrkdwn and email as near as they come. Data quoted in it
    (a business line, a model) must go through `apps.alerts.messages.markup`, so that it
    cannot add a link or a mention; the title is escaped per channel. `link` may be a
    path ("/audits/2026-11") and is made absolute with ALERTS_SITE_URL. Each call is a new
    alert (no deduplication): call it once per report.
    """
    alert = Alert.objects.create(
        dedup_key=f"broadcast:{kind}:{uuid.uuid4()}",
        kind=kind,
        status=Alert.Status.EVENT,
        severity=_severity(severity),
        business_line=business_line or "",
        title=title,
        body_markdown=body_markdown,
        figures={"_i18n": {lang: {"title": t, "body": b} for lang, (t, b) in (translations or {}).items()}},
        link=link,
        created_at=timezone.now(),
    )
    return alert_route(alert=alert)


@transaction.atomic
def channel_send_test(*, channel: Channel) -> Notification:
    """Queue a test message to one channel, whatever its routing or quiet hours."""
    now = timezone.now()
    alert = Alert.objects.create(
        dedup_key=f"test:{channel.id}:{uuid.uuid4()}",
        kind="test",
        status=Alert.Status.EVENT,
        severity=Severity.INFO,
        link="/alerts/channels/",
        created_at=now,
    )
    notification = Notification.objects.create(alert=alert, channel=channel, due_at=now)
    _enqueue(notification)
    return notification


ERR_NO_RULE = "this alert has no rule to mute (a broadcast, a test, or its rule was deleted)"


class AlreadyDone(Exception):
    """The alert's link for this action was used already: `done` says by whom and when."""

    def __init__(self, done: AlertAction) -> None:
        super().__init__(f"{done.action} of alert {done.alert_id} was done at {done.at:%Y-%m-%d %H:%M} UTC")
        self.done = done


def alert_action_done(*, alert: Alert, action: str) -> AlertAction | None:
    """The earlier use of the alert's link for `action`, if any (a link acts once)."""
    return AlertAction.objects.select_related("user").filter(alert=alert, action=action).order_by("at", "id").first()


@transaction.atomic
def alert_act(
    *, alert: Alert, action: str, user: Any, whole_rule: bool = True, now: datetime | None = None
) -> AlertAction:
    """Mute for 1 h or 24 h (never shortening a longer mute) the alert's rule, or with
    `whole_rule` false only the rule's subject of this alert (a user scoped to some lines must
    not silence the other lines of a rule of every line); or acknowledge the alert. Recorded
    in the alert's history (AlertAction) with who did it. Each action is done once per alert:
    a second use of the same link raises AlreadyDone."""
    from apps.alerts.actions import MUTE_FOR

    now = now or timezone.now()
    Alert.objects.select_for_update().filter(id=alert.id).first()  # one use of a link at a time
    done = alert_action_done(alert=alert, action=action)
    if done is not None:
        raise AlreadyDone(done)
    muted_until = None
    if action in MUTE_FOR:
        muted_until = _mute(alert, now + MUTE_FOR[action], whole_rule=whole_rule)
    elif action != AlertAction.Action.ACKNOWLEDGE:
        raise ValueError(f"unknown action {action!r}")
    return AlertAction.objects.create(alert=alert, action=action, user=user, muted_until=muted_until, at=now)


ERR_NOT_FUTURE = "a mute ends in the future"
WEB_ACTIONS = ("ack", "mute_1h", "mute_24h", "mute_until", "unmute")


@transaction.atomic
def alert_subject_act(
    *,
    alert: Alert,
    action: str,
    user: Any,
    until: datetime | None = None,
    rule_too: bool = False,
    now: datetime | None = None,
) -> AlertAction:
    """An action from the web on the (rule, subject) of `alert`: acknowledge the alert (once:
    a second raises AlreadyDone), mute the subject for 1 h or 24 h (never shortening a longer
    mute), mute it until `until` (exactly, so a mute can be shortened), or unmute it (with
    `rule_too`, for a user of every line, also the rule muted as a whole by a message's link). A subject
    has no state yet when its rule never evaluated it (an alert written by hand): one is made.
    Recorded in the alert's history with who did it."""
    from apps.alerts.actions import MUTE_FOR

    now = now or timezone.now()
    if action not in WEB_ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    Alert.objects.select_for_update().filter(id=alert.id).first()
    if action == AlertAction.Action.ACKNOWLEDGE:
        done = alert_action_done(alert=alert, action=action)
        if done is not None:
            raise AlreadyDone(done)
        return AlertAction.objects.create(alert=alert, action=action, user=user, at=now)
    if alert.rule_id is None:
        raise ValueError(ERR_NO_RULE)
    state, _made = AlertState.objects.select_for_update().get_or_create(
        rule_id=alert.rule_id, subject=alert.subject, defaults={"changed_at": now}
    )
    if action in MUTE_FOR:
        muted_until: datetime | None = max(now + MUTE_FOR[action], state.muted_until or now)
    elif action == AlertAction.Action.MUTE_UNTIL:
        if until is None or until <= now:
            raise ValueError(ERR_NOT_FUTURE)
        muted_until = until
    else:
        muted_until = None
    AlertState.objects.filter(id=state.id).update(muted_until=muted_until)
    if action == AlertAction.Action.UNMUTE and rule_too:
        Rule.objects.filter(id=alert.rule_id).update(muted_until=None)
    return AlertAction.objects.create(alert=alert, action=action, user=user, muted_until=muted_until, at=now)


def subject_muted_until(alerts: Sequence[Alert], *, now: datetime | None = None) -> dict[int, datetime]:
    """Each alert's (by id) end of the mute of its rule or its subject, the later, where one
    is muted now."""
    now = now or timezone.now()
    ruled = [a for a in alerts if a.rule_id is not None]
    if not ruled:
        return {}
    states = AlertState.objects.filter(
        rule_id__in={a.rule_id for a in ruled}, subject__in={a.subject for a in ruled}, muted_until__gt=now
    )
    by_key = {(s.rule_id, s.subject): s.muted_until for s in states}
    rules = dict(
        Rule.objects.filter(id__in={a.rule_id for a in ruled}, muted_until__gt=now).values_list("id", "muted_until")
    )
    found = {}
    for alert in ruled:
        ends = [t for t in (by_key.get((alert.rule_id, alert.subject)), rules.get(alert.rule_id)) if t is not None]
        if ends:
            found[alert.id] = max(ends)
    return found


def _mute(alert: Alert, until: datetime, *, whole_rule: bool) -> datetime:
    target: Any = Rule.objects.filter(id=alert.rule_id)
    if not whole_rule:
        target = AlertState.objects.filter(rule_id=alert.rule_id, subject=alert.subject)
    muted = target.select_for_update().first()
    if muted is None:
        raise ValueError(ERR_NO_RULE)
    until = max(until, muted.muted_until or until)
    target.update(muted_until=until)
    return until


def channel_save(*, form: Any) -> Channel:
    """Create or change a channel from its validated form (apps.alerts.admin.ChannelForm): the
    URL and secret are kept where left empty, and stored encrypted."""
    channel: Channel = form.save()
    return channel


def channel_disable(*, channel: Channel, reason: str) -> None:
    now = timezone.now()
    Channel.objects.filter(id=channel.id).update(disabled_at=now, disabled_reason=reason[:1000])
    log.warning("alerts channel %s (%s) disabled after a permanent error", channel.id, channel.kind)


def channel_enable(*, channel: Channel) -> None:
    Channel.objects.filter(id=channel.id).update(disabled_at=None, disabled_reason="")


def _claim(notification_id: int, now: datetime) -> Notification | None:
    claimed = Notification.objects.filter(id=notification_id, status=Notification.Status.QUEUED, due_at__lte=now)
    if not claimed.update(status=Notification.Status.SENDING, started_at=now):
        return None
    return Notification.objects.select_related("alert", "channel").get(id=notification_id)


def _finish(notification: Notification, *, error: str = "", permanent: bool = False) -> None:
    status = Notification.Status.FAILED if error else Notification.Status.SENT
    Notification.objects.filter(id=notification.id).update(
        status=status, finished_at=timezone.now(), error=error, permanent=permanent
    )


def _send(notification: Notification) -> None:
    channel = notification.channel
    if channel.disabled_at is not None and notification.alert.kind != "test":
        raise TransportError(f"channel disabled: {channel.disabled_reason}", permanent=True)
    if not channel.secrets_readable:
        raise TransportError(ERR_SECRETS_UNREADABLE, permanent=True)
    from apps.alerts.actions import action_links

    alert, language = notification.alert, channel.language
    transport_class(channel.kind)(channel).notify(message_for(alert, language, actions=action_links(alert, language)))


def notification_send(*, notification_id: int, retry_delays: Sequence[float]) -> Notification | None:
    """Deliver one queued attempt. Returns the next attempt when this one failed with a
    retryable error and attempts remain (queued `retry_delays[attempt - 1]` seconds later);
    the caller enqueues it. A permanent error disables the channel."""
    now = timezone.now()
    notification = _claim(notification_id, now)
    if notification is None:
        return None  # already taken by another worker, or not yet due
    try:
        _send(notification)
    except TransportError as exc:
        _finish(notification, error=exc.message, permanent=exc.permanent)
        if exc.permanent:
            if notification.channel.disabled_at is None:
                channel_disable(channel=notification.channel, reason=f"{now:%Y-%m-%d %H:%M} UTC: {exc.message}")
            return None
        if notification.attempt > len(retry_delays):
            return None
        delay = retry_delays[notification.attempt - 1]
        return Notification.objects.create(
            alert=notification.alert,
            channel=notification.channel,
            attempt=notification.attempt + 1,
            due_at=timezone.now() + timedelta(seconds=delay),
        )
    _finish(notification)
    return None


def notifications_due(*, now: datetime | None = None, stale_after: timedelta = timedelta(minutes=10)) -> list[int]:
    """Queued attempts that are due (deferred by quiet hours, or whose message was lost)."""
    now = now or timezone.now()
    Notification.objects.filter(status=Notification.Status.SENDING, started_at__lt=now - stale_after).update(
        status=Notification.Status.FAILED, error="the worker stopped while sending", finished_at=now
    )
    return list(
        Notification.objects.filter(status=Notification.Status.QUEUED, due_at__lte=now)
        .order_by("due_at")
        .values_list("id", flat=True)[:1000]
    )
