"""Admin pages: channels (with "send test message", the reason a channel was disabled, and
its delivery log), rules (mute for an hour / a day, unmute), alerts and notifications."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.alerts import services
from apps.alerts.detectors import DETECTORS
from apps.alerts.models import Alert, Channel, Notification, Rule
from apps.alerts.selectors import spike_by_problem
from apps.classification.health import RATIOS


def redacted(url: str) -> str:
    """Scheme and host only: the rest of a webhook URL is often its token."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}/…" if parts.hostname else ""


class ChannelForm(forms.ModelForm):
    # URL and secret are write-only: the page shows the host, never the token or the secret.
    url = forms.CharField(
        label=_("Webhook URL"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Stored encrypted; leave empty to keep. Email: empty."),
    )
    secret = forms.CharField(
        label=_("Signing secret"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Where the provider has one; stored encrypted, leave empty to keep."),
    )

    class Meta:
        model = Channel
        fields = [
            "name", "kind", "language", "url", "secret", "email_to", "business_lines", "min_severity",
            "quiet_start", "quiet_end", "quiet_tz",
        ]  # fmt: skip
        # The model's field names are English identifiers: the page (admin and channels) shows these.
        labels = {
            "name": _("Name"),
            "kind": _("Kind"),
            "language": _("Language"),
            "email_to": _("Email addresses"),
            "business_lines": _("Business lines"),
            "min_severity": _("Minimum severity"),
            "quiet_start": _("Quiet hours from"),
            "quiet_end": _("Quiet hours until"),
            "quiet_tz": _("Time zone of the quiet hours"),
        }
        help_texts = {
            "email_to": _("Email: comma-separated addresses."),
            "business_lines": _("Comma-separated; empty: every line."),
            "quiet_start": _("Quiet hours: non-critical alerts wait."),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for field in ("url", "secret"):
            if not data.get(field) and self.instance.pk:
                data[field] = getattr(self.instance, field)
        kind = data.get("kind")
        if kind and kind != Channel.Kind.EMAIL and not data.get("url"):
            self.add_error("url", _("a webhook URL is required for this kind"))
        if kind == Channel.Kind.EMAIL and not data.get("email_to"):
            self.add_error("email_to", _("at least one address"))
        return data


class NotificationInline(admin.TabularInline):
    model = Notification
    extra = 0
    can_delete = False
    fields = ["alert", "attempt", "status", "due_at", "finished_at", "error", "permanent"]
    readonly_fields = fields
    ordering = ["-id"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Notification]:
        return super().get_queryset(request).select_related("alert")


@admin.register(Channel)
class ChannelAdmin(ScopedModelAdmin):  # a channel may serve several lines: spans them
    form = ChannelForm
    list_display = ["name", "kind", "language", "endpoint", "lines", "min_severity", "state"]
    list_filter = ["kind", "language"]
    readonly_fields = ["state", "endpoint"]
    inlines = [NotificationInline]
    actions = ["send_test", "enable"]

    @admin.display(description="where")
    def endpoint(self, channel: Channel) -> str:
        return channel.email_to if channel.kind == Channel.Kind.EMAIL else redacted(channel.url)

    @admin.display(description="business lines")
    def lines(self, channel: Channel) -> str:
        return ", ".join(channel.business_lines) or "all"

    @admin.display(description="state")
    def state(self, channel: Channel) -> str:
        if channel.disabled_at is None:
            return "enabled"
        return format_html('<strong style="color:#b00">disabled</strong>: {}', channel.disabled_reason)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        channel = self.get_object(request, object_id)
        if channel is not None and channel.disabled_at is not None:
            self.message_user(
                request,
                f"This channel is disabled: {channel.disabled_reason} Fix it, then use the action "
                "'Enable' and 'Send a test message' from the list.",
                messages.ERROR,
            )
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.action(description="Send a test message", permissions=["change"])
    def send_test(self, request: HttpRequest, queryset: QuerySet[Channel]) -> None:
        for channel in queryset:
            services.channel_send_test(channel=channel)
        self.message_user(request, f"Queued a test message to {queryset.count()} channel(s); see the delivery log.")

    @admin.action(description="Enable (after fixing a permanent error)", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Channel]) -> None:
        for channel in queryset:
            services.channel_enable(channel=channel)


# The health thresholds live in one table that every surface reads, not in a rule's parameters.
THRESHOLD_FIELDS = [field for _, field, _ in RATIOS]
THRESHOLDS_MOVED = (
    "%s: the health thresholds are set in Classification > Health thresholds (per business line), "
    "which the overview, the audit and the month-end checks read too"
)


class RuleForm(forms.ModelForm):
    detector = forms.ChoiceField(choices=[])

    class Meta:
        model = Rule
        fields = [
            "name",
            "detector",
            "params",
            "business_line",
            "severity",
            "cooldown",
            "every",
            "enabled",
            "muted_until",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["detector"].choices = [(name, name) for name in sorted(DETECTORS)]
        detector = DETECTORS.get(self.initial.get("detector", ""))
        if detector is not None:
            self.fields["params"].help_text = f"Defaults: {detector.defaults}"

    def clean_params(self) -> Any:
        params = self.cleaned_data["params"] or {}
        moved = sorted(set(params) & set(THRESHOLD_FIELDS))
        if self.cleaned_data.get("detector") == "health" and moved:
            raise forms.ValidationError(THRESHOLDS_MOVED % ", ".join(moved))
        if self.cleaned_data.get("detector") == "spike" and "by" in params:
            problem = spike_by_problem(params["by"])
            if problem:
                raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return params


@admin.register(Rule)
class RuleAdmin(ScopedModelAdmin):
    form = RuleForm
    line_field = "business_line"  # empty (every line) is outside any scope
    list_display = ["name", "detector", "business_line", "severity", "enabled", "muted_until", "last_evaluated_at"]
    list_filter = ["detector", "enabled"]
    readonly_fields = ["last_evaluated_at", "last_error"]
    actions = ["mute_hour", "mute_day", "unmute"]

    def _mute(self, queryset: QuerySet[Rule], hours: int | None) -> None:
        queryset.update(muted_until=timezone.now() + timedelta(hours=hours) if hours else None)

    @admin.action(description="Mute for an hour", permissions=["change"])
    def mute_hour(self, request: HttpRequest, queryset: QuerySet[Rule]) -> None:
        self._mute(queryset, 1)

    @admin.action(description="Mute for a day", permissions=["change"])
    def mute_day(self, request: HttpRequest, queryset: QuerySet[Rule]) -> None:
        self._mute(queryset, 24)

    @admin.action(description="Unmute", permissions=["change"])
    def unmute(self, request: HttpRequest, queryset: QuerySet[Rule]) -> None:
        self._mute(queryset, None)


@admin.register(Alert)
class AlertAdmin(ScopedModelAdmin):
    line_field = "business_line"
    list_display = ["created_at", "kind", "status", "severity", "business_line", "subject", "level", "suppressed"]
    list_filter = ["kind", "status", "severity", "suppressed"]
    search_fields = ["subject", "business_line", "title"]
    readonly_fields = [f.name for f in Alert._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(ScopedModelAdmin):  # names its channel: spans lines
    list_display = ["id", "alert", "channel", "attempt", "status", "due_at", "finished_at", "error"]
    list_filter = ["status", "channel"]
    readonly_fields = [f.name for f in Notification._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
