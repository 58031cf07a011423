"""Alert rules and their state, chat channels, alerts (the outbox) and delivery attempts."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.alerts.crypto import UNREADABLE, EncryptedTextField


class Severity(models.IntegerChoices):
    INFO = 10, "info"
    WARNING = 20, "warning"
    CRITICAL = 30, "critical"


class Language(models.TextChoices):
    EN = "en", "English"
    ZH_HANS = "zh-hans", "简体中文"


class Rule(models.Model):
    """A detector with its parameters. Evaluation runs the detector over every subject it
    covers (a business line, a model, a collector) and keeps one AlertState per subject."""

    name = models.CharField(max_length=200, unique=True)
    detector = models.CharField(max_length=40)
    params = models.JSONField(default=dict, blank=True, help_text="Overrides of the detector's defaults.")
    business_line = models.CharField(max_length=256, blank=True, help_text="Only this business line; empty: all.")
    severity = models.SmallIntegerField(choices=Severity.choices, default=Severity.WARNING)
    cooldown = models.DurationField(
        default=timedelta(hours=1), help_text="A subject that resolved fires again only after this long."
    )
    every = models.DurationField(
        default=timedelta(seconds=30), help_text="Evaluated at most this often (beat ticks every 30 s)."
    )
    enabled = models.BooleanField(default=True)
    muted_until = models.DateTimeField(null=True, blank=True, help_text="Evaluated, but nothing is sent until then.")
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        verbose_name = _("alert rule")
        verbose_name_plural = _("alert rules")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def is_muted(self, now: datetime) -> bool:
        return self.muted_until is not None and self.muted_until > now


class AlertState(models.Model):
    """Where one subject of a rule stands: ok -> firing -> resolved (-> firing ...).
    `episode` counts firings; it is part of the alerts' deduplication key."""

    class Status(models.TextChoices):
        OK = "ok"
        FIRING = "firing"
        RESOLVED = "resolved"

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="states")
    subject = models.CharField(max_length=300)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OK)
    level = models.CharField(max_length=40, blank=True)
    episode = models.IntegerField(default=0)
    changed_at = models.DateTimeField()
    fired_at = models.DateTimeField(null=True, blank=True)
    figures = models.JSONField(default=dict)
    muted_until = models.DateTimeField(
        null=True, blank=True, help_text="This subject of the rule is evaluated, but nothing is sent until then."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "subject"], name="alerts_state_key")]

    def is_muted(self, now: datetime) -> bool:
        return self.muted_until is not None and self.muted_until > now


class Alert(models.Model):
    """A message to deliver: a rule's firing or resolve, or a broadcast (the audit summary).
    Written by evaluation; delivery reads it and never recomputes it (the outbox)."""

    class Status(models.TextChoices):
        FIRING = "firing"
        RESOLVED = "resolved"
        EVENT = "event"

    rule = models.ForeignKey(Rule, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")
    dedup_key = models.CharField(max_length=400, unique=True)
    kind = models.CharField(max_length=40, help_text="The detector, or the broadcast's kind (e.g. audit).")
    status = models.CharField(max_length=10, choices=Status.choices)
    severity = models.SmallIntegerField(choices=Severity.choices)
    business_line = models.CharField(max_length=256, blank=True)
    subject = models.CharField(max_length=300, blank=True)
    level = models.CharField(max_length=40, blank=True)
    figures = models.JSONField(default=dict, help_text="The detector's numbers; messages are rendered from them.")
    title = models.TextField(blank=True, help_text="Broadcasts only: the title as given.")
    body_markdown = models.TextField(blank=True, help_text="Broadcasts only: the body as given.")
    link = models.CharField(max_length=2000, blank=True)
    suppressed = models.CharField(max_length=40, blank=True, help_text="Why nothing was sent (muted, no route).")
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = _("alert")
        verbose_name_plural = _("alerts")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["created_at"], name="alerts_alert_created")]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} {self.subject or self.title}"


class Channel(models.Model):
    """Where alerts go. Routing: an alert goes to every enabled channel whose business lines
    include the alert's (or that lists none) and whose minimum severity it reaches."""

    class Kind(models.TextChoices):
        FEISHU = "feishu", "Feishu / Lark custom bot"
        DINGTALK = "dingtalk", "DingTalk robot"
        WECOM = "wecom", "WeCom group bot"
        SLACK = "slack", "Slack incoming webhook"
        WEBHOOK = "webhook", "Generic JSON webhook (HMAC-SHA256)"
        EMAIL = "email", "Email"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    language = models.CharField(max_length=8, choices=Language.choices, default=Language.ZH_HANS)
    url = EncryptedTextField(blank=True, help_text="Webhook URL (stored encrypted). Email: empty.")
    secret = EncryptedTextField(blank=True, help_text="Signing secret (stored encrypted), where the provider has one.")
    email_to = models.CharField(max_length=1000, blank=True, help_text="Email: comma-separated addresses.")
    business_lines = ArrayField(models.CharField(max_length=256), default=list, blank=True)
    min_severity = models.SmallIntegerField(choices=Severity.choices, default=Severity.WARNING)
    quiet_start = models.TimeField(null=True, blank=True, help_text="Quiet hours: non-critical alerts wait.")
    quiet_end = models.TimeField(null=True, blank=True)
    quiet_tz = models.CharField(max_length=64, default="Asia/Shanghai")
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("channel")
        verbose_name_plural = _("channels")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def secrets_readable(self) -> bool:
        return UNREADABLE not in (self.url, self.secret)

    def quiet_until(self, now: datetime) -> datetime | None:
        """The end of the quiet hours `now` falls in, or None outside them."""
        if self.quiet_start is None or self.quiet_end is None or self.quiet_start == self.quiet_end:
            return None
        local = now.astimezone(ZoneInfo(self.quiet_tz))
        start, end, t = self.quiet_start, self.quiet_end, local.time()
        inside = start <= t < end if start < end else (t >= start or t < end)
        if not inside:
            return None
        end_day = local.date() if t < end else local.date() + timedelta(days=1)
        return datetime.combine(end_day, end, tzinfo=local.tzinfo)


class Notification(models.Model):
    """One delivery attempt of an alert to a channel, written before it is sent."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    attempt = models.SmallIntegerField(default=1)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    due_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    permanent = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["alert", "channel", "attempt"], name="alerts_notification_attempt")
        ]
        indexes = [
            models.Index(fields=["due_at"], name="alerts_notification_queued", condition=Q(status="queued")),
        ]

    def __str__(self) -> str:
        return f"{self.alert_id} -> {self.channel_id} #{self.attempt} {self.status}"


class AlertAction(models.Model):
    """What someone did about an alert, from the signed link in its message or from the web
    (/alerts/ and the page the alert opens): muted its rule or its subject for a while, muted
    its subject until a time, unmuted it, or acknowledged it. The alert's history, newest first."""

    class Action(models.TextChoices):
        MUTE_1H = "mute_1h", _("muted for 1 hour")
        MUTE_24H = "mute_24h", _("muted for 24 hours")
        MUTE_UNTIL = "mute_until", _("muted until a time")
        UNMUTE = "unmute", _("unmuted")
        ACKNOWLEDGE = "ack", _("acknowledged")

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="actions")
    action = models.CharField(max_length=10, choices=Action.choices)
    user = models.ForeignKey("auth.User", null=True, on_delete=models.SET_NULL, related_name="+")
    muted_until = models.DateTimeField(null=True, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.alert_id} {self.action} by {self.user_id}"
