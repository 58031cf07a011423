"""WeCom (企业微信) group bot: markdown, the key in the URL, no signature.
Errors come as HTTP 200 with a non-zero `errcode`."""

from __future__ import annotations

from typing import Any

from apps.alerts.messages import Message, links_markdown, markdown, markup
from apps.alerts.models import Severity
from apps.alerts.transports.base import HttpTransport

COLOURS = {Severity.INFO: "comment", Severity.WARNING: "warning", Severity.CRITICAL: "warning"}


class WeCom(HttpTransport):
    code_field = "errcode"
    # 93000 invalid webhook URL/key, 93004 bot removed, 93008 not in the chat, 40008 bad
    # message type, 40058 bad parameter, 44004 empty content. 45009 (rate limit) is retried.
    permanent_codes = frozenset({93000, 93004, 93008, 40008, 40058, 44004})

    def payload(self, message: Message) -> dict[str, Any]:
        colour = "info" if message.resolved else COLOURS[Severity(message.severity)]
        content = f'## <font color="{colour}">{markup(message.title)}</font>\n' + markdown(message)
        if message.link or message.actions:
            content += f"\n{links_markdown(message)}"
        return {"msgtype": "markdown", "markdown": {"content": content}}

    def notify(self, message: Message) -> None:
        self.post(self.payload(message))
