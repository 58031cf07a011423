"""Generic JSON webhook. With a secret, X-Costplatform-Signature is the hex
HMAC-SHA256(secret, f"{timestamp}.{body}") and X-Costplatform-Timestamp the Unix seconds;
receivers recompute it over the raw body and reject stale timestamps."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from apps.alerts.messages import Message, markdown, plain
from apps.alerts.transports.base import HttpTransport


def webhook_signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


class Webhook(HttpTransport):
    def headers(self, body: bytes) -> dict[str, str]:
        headers = super().headers(body)
        if self.channel.secret:
            timestamp = int(self.now())
            headers["X-Costplatform-Timestamp"] = str(timestamp)
            headers["X-Costplatform-Signature"] = webhook_signature(self.channel.secret, timestamp, body)
        return headers

    def payload(self, message: Message) -> dict[str, Any]:
        return {
            "title": plain(message.title),
            "text": markdown(message),
            "figures": [{"label": label, "value": plain(value)} for label, value in message.lines],
            "severity": message.severity,
            "resolved": message.resolved,
            "link": message.link,
            "actions": [{"label": label, "url": url} for label, url in message.actions],
            "language": message.language,
        }

    def notify(self, message: Message) -> None:
        self.post(self.payload(message))
