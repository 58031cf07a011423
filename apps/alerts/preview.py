"""What each kind of channel gets, for the channels page: a sample spike rendered through
the real message code and each transport's payload builder (nothing is sent), and drawn from
that payload as the channel shows it: Feishu's card with its coloured header and buttons,
DingTalk's and WeCom's markdown (WeCom's coloured title), Slack's blocks with buttons, the
webhook's fields and an email's subject and plain body."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy

from apps.alerts.actions import LABELS as ACTION_LABELS
from apps.alerts.actions import OFFERED
from apps.alerts.messages import Message, absolute, message_for
from apps.alerts.models import Alert, Channel, Severity
from apps.alerts.selectors import page_link
from apps.alerts.transports import transport_class
from apps.common.buckets import hour_floor


@dataclass(frozen=True)
class Card:
    """A channel's message as that channel draws it, read back from the payload it gets."""

    header: str
    body: SafeString
    accent: str = ""  # the header's colour where the provider has one (Feishu's template, WeCom's font)
    buttons: list[tuple[str, str]] = field(default_factory=list)  # (label, URL): provider buttons
    fields: list[tuple[str, str]] = field(default_factory=list)  # the webhook's figures


@dataclass(frozen=True)
class Preview:
    kind: str
    label: str
    message: Message
    payload: str  # the provider's JSON (email: subject and body), indented
    card: Card


_LINK = re.compile(r"\[([^\]]+)\]\((\S+?)\)")
_FONT = re.compile(r'^## <font color="(\w+)">(.*)</font>$')


def _drawn(text: str, *, bold: str = "**") -> SafeString:
    """Chat markdown as the client shows it: bold, links (not followed: a sample), line breaks."""
    html = str(escape(text))
    html = _LINK.sub(lambda m: f'<span class="link" title="{m.group(2)}">{m.group(1)}</span>', html)
    star = re.escape(str(escape(bold)))
    html = re.sub(rf"{star}(.+?){star}", r"<strong>\1</strong>", html)
    html = re.sub(r"^### (.*)$", r'<strong class="md-title">\1</strong>', html, flags=re.M)
    return mark_safe(re.sub(r"\n+", "<br>", html.strip()))  # escaped above


def card_of(kind: str, payload: dict[str, Any]) -> Card:
    if kind == Channel.Kind.FEISHU:
        card = payload["card"]
        body = next(e["text"]["content"] for e in card["elements"] if e["tag"] == "div")
        actions = [a for e in card["elements"] if e["tag"] == "action" for a in e["actions"]]
        buttons = [(a["text"]["content"], a["url"]) for a in actions]
        header = card["header"]
        return Card(header["title"]["content"], _drawn(body), accent=header["template"], buttons=buttons)
    if kind == Channel.Kind.DINGTALK:
        return Card(payload["markdown"]["title"], _drawn(payload["markdown"]["text"]))
    if kind == Channel.Kind.WECOM:
        first, _, rest = payload["markdown"]["content"].partition("\n")
        found = _FONT.match(first)
        title, accent = (found.group(2), found.group(1)) if found else (first, "")
        return Card(title, _drawn(rest), accent=accent)
    if kind == Channel.Kind.SLACK:
        blocks = {b["type"]: b for b in payload["blocks"]}
        buttons = [(b["text"]["text"], b["url"]) for b in blocks.get("actions", {}).get("elements", [])]
        return Card(
            blocks["header"]["text"]["text"], _drawn(blocks["section"]["text"]["text"], bold="*"), buttons=buttons
        )
    if kind == Channel.Kind.EMAIL:
        return Card(payload["subject"], mark_safe(escape(payload["body"])))  # escaped
    links = [
        *([("link", payload["link"])] if payload.get("link") else []),
        *((a["label"], a["url"]) for a in payload["actions"]),
    ]
    return Card(
        payload["title"], mark_safe(""), buttons=links, fields=[(f["label"], f["value"]) for f in payload["figures"]]
    )


# Each kind as the pages name it, in the reader's language (the model's choices stay English).
CHANNEL_KINDS = {
    Channel.Kind.FEISHU: gettext_lazy("Feishu / Lark custom bot"),
    Channel.Kind.DINGTALK: gettext_lazy("DingTalk robot"),
    Channel.Kind.WECOM: gettext_lazy("WeCom group bot"),
    Channel.Kind.SLACK: gettext_lazy("Slack incoming webhook"),
    Channel.Kind.WEBHOOK: gettext_lazy("Generic JSON webhook (HMAC-SHA256)"),
    Channel.Kind.EMAIL: gettext_lazy("Email"),
}


def sample_alert() -> Alert:
    """An unsaved spike of the current hour, with every part a real one has."""
    hour = hour_floor(timezone.now())
    window = (hour, hour + timedelta(hours=1))
    contributors = [
        {"model": "qwen2.5-7b-instruct", "feature": "faq", "step": "answer", "share": 0.62},
        {"model": "qwen2.5-7b-instruct", "feature": "triage", "step": "", "share": 0.25},
        {"model": "llama-3-70b", "feature": "faq", "step": "plan", "share": 0.13},
    ]
    figures = {
        "tokens": 184_000,
        "threshold": 90_000,
        "baseline": 45_000,
        "ratio": 4.09,
        "factor": 2.0,
        "_window": [at.isoformat() for at in window],
        "_contributors": contributors,
        "_since": (hour + timedelta(minutes=12)).isoformat(),
    }
    return Alert(
        kind="spike",
        status=Alert.Status.FIRING,
        severity=Severity.WARNING,
        business_line="support",
        subject="support",
        figures=figures,
        link=page_link(start=window[0], end=window[1], business_line="support"),
        created_at=timezone.now(),
    )


def channel_previews(*, language: str) -> list[Preview]:
    alert = sample_alert()
    sample_link = absolute(reverse("alert-action", args=["sample"]))
    actions = [(ACTION_LABELS[language][action], sample_link) for action in OFFERED]
    message = message_for(alert, language, actions=actions)
    found = []
    for kind, label in Channel.Kind.choices:
        channel = Channel(kind=kind, name=f"preview {kind}", url="https://example.invalid/hook", language=language)
        payload: dict[str, Any] = transport_class(kind)(channel).payload(message)
        shown = json.dumps(payload, ensure_ascii=False, indent=2)
        found.append(Preview(kind, str(CHANNEL_KINDS.get(kind, label)), message, shown, card_of(kind, payload)))
    return found
