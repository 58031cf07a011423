"""Channel kinds to transports, imported lazily (healthchecks' TRANSPORTS idea)."""

from __future__ import annotations

from functools import cache
from importlib import import_module

from apps.alerts.transports.base import Transport, TransportError

TRANSPORTS = {
    "feishu": "apps.alerts.transports.feishu.Feishu",
    "dingtalk": "apps.alerts.transports.dingtalk.DingTalk",
    "wecom": "apps.alerts.transports.wecom.WeCom",
    "slack": "apps.alerts.transports.slack.Slack",
    "webhook": "apps.alerts.transports.webhook.Webhook",
    "email": "apps.alerts.transports.mail.Email",
}


@cache
def transport_class(kind: str) -> type[Transport]:
    module, name = TRANSPORTS[kind].rsplit(".", 1)
    cls: type[Transport] = getattr(import_module(module), name)
    return cls


__all__ = ["TRANSPORTS", "Transport", "TransportError", "transport_class"]
