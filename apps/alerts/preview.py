"""What each kind of channel gets, for the channels page: a sample spike rendered through
the real message code and each transport's payload builder (nothing is sent)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.urls import reverse
from django.utils import timezone

from apps.alerts.actions import LABELS as ACTION_LABELS
from apps.alerts.actions import OFFERED
from apps.alerts.messages import Message, absolute, message_for
from apps.alerts.models import Alert, Channel, Severity
from apps.alerts.selectors import page_link
from apps.alerts.transports import transport_class
from apps.common.buckets import hour_floor


@dataclass(frozen=True)
class Preview:
    kind: str
    label: str
    message: Message
    payload: str  # the provider's JSON (email: subject and body), indented


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
        found.append(Preview(kind, str(label), message, json.dumps(payload, ensure_ascii=False, indent=2)))
    return found
