"""Feishu / Lark custom bot: an interactive card, signed when the bot has a signature secret.

sign = base64(HMAC-SHA256(key=f"{timestamp}\\n{secret}", msg=b"")), timestamp in seconds,
both in the JSON body. Errors come as HTTP 200 with a non-zero `code`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from apps.alerts.messages import Message, markdown, plain
from apps.alerts.models import Severity
from apps.alerts.transports.base import HttpTransport

TEMPLATES = {Severity.INFO: "blue", Severity.WARNING: "orange", Severity.CRITICAL: "red"}


def feishu_sign(timestamp: int, secret: str) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


class Feishu(HttpTransport):
    code_field = "code"
    # 19001 invalid param/token, 19002 bot not found, 19021 bad signature or stale timestamp,
    # 19022 IP not allowed, 19024 keyword missing, 9499 bad request: nothing a retry fixes.
    permanent_codes = frozenset({9499, 19001, 19002, 19021, 19022, 19024})

    def payload(self, message: Message) -> dict[str, Any]:
        elements: list[dict[str, Any]] = [{"tag": "div", "text": {"tag": "lark_md", "content": markdown(message)}}]
        buttons = [
            {"tag": "button", "type": kind, "url": url, "text": {"tag": "plain_text", "content": label}}
            for kind, (label, url) in [
                *([("primary", (message.view_label, message.link))] if message.link else []),
                *(("default", action) for action in message.actions),
            ]
        ]
        if buttons:
            elements.append({"tag": "action", "actions": buttons})
        template = "green" if message.resolved else TEMPLATES[Severity(message.severity)]
        header = {"title": {"tag": "plain_text", "content": plain(message.title)}, "template": template}
        return {"msg_type": "interactive", "card": {"header": header, "elements": elements}}

    def notify(self, message: Message) -> None:
        payload = self.payload(message)
        if self.channel.secret:
            timestamp = int(self.now())
            payload = {"timestamp": str(timestamp), "sign": feishu_sign(timestamp, self.channel.secret), **payload}
        self.post(payload)
