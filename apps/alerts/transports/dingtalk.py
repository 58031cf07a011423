"""DingTalk custom robot: markdown (title + text), signed when the robot has a sign secret.

sign = urlencode(base64(HMAC-SHA256(key=secret, msg=f"{timestamp_ms}\\n{secret}"))), sent with
timestamp as query parameters. Errors come as HTTP 200 with a non-zero `errcode`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any
from urllib.parse import quote_plus

from apps.alerts.messages import Message, links_markdown, markdown, markup, plain
from apps.alerts.transports.base import HttpTransport


def dingtalk_sign(timestamp_ms: int, secret: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return quote_plus(base64.b64encode(digest).decode())


class DingTalk(HttpTransport):
    code_field = "errcode"
    # 300001/300005 token missing or unknown, 310000 signature, keyword or IP check failed,
    # 400013 group dissolved, 400101/400102 robot unknown or disabled, 40035 bad parameter.
    permanent_codes = frozenset({300001, 300005, 310000, 400013, 400101, 400102, 40035})

    def url(self) -> str:
        if not self.channel.secret:
            return self.channel.url
        timestamp_ms = int(self.now() * 1000)
        joiner = "&" if "?" in self.channel.url else "?"
        sign = dingtalk_sign(timestamp_ms, self.channel.secret)
        return f"{self.channel.url}{joiner}timestamp={timestamp_ms}&sign={sign}"

    def payload(self, message: Message) -> dict[str, Any]:
        text = f"### {markup(message.title)}\n\n" + markdown(message).replace("\n", "\n\n")
        if message.link or message.actions:
            text += f"\n\n{links_markdown(message)}"
        return {"msgtype": "markdown", "markdown": {"title": plain(message.title), "text": text}}

    def notify(self, message: Message) -> None:
        self.post(self.payload(message))
