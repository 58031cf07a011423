"""Slack incoming webhook: `text` (the notification fallback) and Block Kit `blocks`.
Slack answers errors with HTTP 4xx (invalid_payload, no_service, channel_is_archived)."""

from __future__ import annotations

from typing import Any

from apps.alerts.messages import Message, markdown, markup, plain
from apps.alerts.transports.base import HttpTransport


def slack_payload(message: Message) -> dict[str, Any]:
    """Block Kit payload; Slack-compatible webhooks (Mattermost, Rocket.Chat) take the same."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": plain(message.title)[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": markdown(message, bold="*")}},
    ]
    links = ([(message.view_label, message.link)] if message.link else []) + message.actions
    if links:
        buttons = [
            {"type": "button", "text": {"type": "plain_text", "text": label}, "url": url} for label, url in links
        ]
        blocks.append({"type": "actions", "elements": buttons})
    # `text` is the notification's fallback and is read as mrkdwn: <!channel> there would ping everyone.
    return {"text": markup(message.title), "blocks": blocks}


class Slack(HttpTransport):
    def payload(self, message: Message) -> dict[str, Any]:
        return slack_payload(message)

    def notify(self, message: Message) -> None:
        self.post(slack_payload(message))
