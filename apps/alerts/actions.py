"""Signed one-click links in a message: mute the alert's rule for 1 h or 24 h, acknowledge it.

A link carries the alert and the action, signed with SECRET_KEY (django.core.signing) and
stamped, so that it cannot be made up or changed and stops working after ACTION_MAX_AGE.
Opening it needs a login of a role that may act (admin, engineer) and a confirmation: the
GET shows what will happen, the POST (with its CSRF token) does it. A chat client that
fetches the link to preview it therefore changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.core import signing
from django.urls import reverse

from apps.alerts.messages import CATALOGUE, absolute
from apps.alerts.models import Alert, AlertAction

SALT = "costplatform.alerts.action"
ACTION_MAX_AGE = timedelta(days=7)
MUTE_FOR = {"mute_1h": timedelta(hours=1), "mute_24h": timedelta(hours=24)}
OFFERED = ("mute_1h", "mute_24h", "ack")
ACTORS = ("admin", "engineer")
LABELS = {
    "en": {"mute_1h": "Mute 1 h", "mute_24h": "Mute 24 h", "ack": "Acknowledge"},
    "zh-hans": {"mute_1h": "静默 1 小时", "mute_24h": "静默 24 小时", "ack": "确认已知"},
}


class ActionLinkError(Exception):
    """A link that was changed, made up, or is too old (`expired`)."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class ActionRequest:
    alert_id: int
    action: str


def action_token(*, alert_id: int, action: str) -> str:
    return signing.dumps({"alert": alert_id, "do": action}, salt=SALT)


def action_read(token: str) -> ActionRequest:
    try:
        data = signing.loads(token, salt=SALT, max_age=ACTION_MAX_AGE)
    except signing.SignatureExpired as exc:
        raise ActionLinkError("this link has expired", expired=True) from exc
    except signing.BadSignature as exc:
        raise ActionLinkError("this link is not valid (changed or incomplete)") from exc
    if not isinstance(data, dict) or data.get("do") not in AlertAction.Action.values:
        raise ActionLinkError("this link is not valid (changed or incomplete)")
    return ActionRequest(alert_id=int(data["alert"]), action=str(data["do"]))


def action_links(alert: Alert, language: str) -> list[tuple[str, str]]:
    """(label, absolute URL) of each action a message of `alert` offers: a firing rule's alert
    only (a resolve, a broadcast or a test has nothing to mute or acknowledge)."""
    if alert.rule_id is None or alert.status != Alert.Status.FIRING or alert.pk is None:
        return []
    labels = LABELS.get(language if language in CATALOGUE else "en", LABELS["en"])
    return [
        (
            labels[action],
            absolute(reverse("alert-action", args=[action_token(alert_id=alert.pk, action=action)])),
        )
        for action in OFFERED
    ]
