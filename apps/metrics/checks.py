"""System checks for who may read /metrics, so an open scrape shows at start-up."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

W_NO_TOKEN = (
    "COSTPLATFORM_METRICS_REQUIRE_TOKEN is on (the default with HTTPS=true) but COSTPLATFORM_METRICS_TOKEN "
    "is empty: /metrics refuses every scrape"
)
W_ALLOW_BEHIND_PROXY = (
    "COSTPLATFORM_METRICS_ALLOW serves /metrics by client address, but behind a proxy (HTTPS=true or "
    "SECURE_PROXY_SSL_HEADER) every request comes from the proxy's address: anyone the proxy forwards "
    "is served"
)
HINT = "Set COSTPLATFORM_METRICS_TOKEN and scrape with Authorization: Bearer <token> (docs/metrics.md)."


def _behind_proxy() -> bool:
    return bool(settings.HTTPS or settings.SECURE_PROXY_SSL_HEADER)


@checks.register(checks.Tags.security)
def metrics_access(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    if settings.METRICS_REQUIRE_TOKEN and not settings.METRICS_TOKEN:
        found.append(checks.Warning(W_NO_TOKEN, hint=HINT, id="metrics.W001"))
    if settings.METRICS_ALLOW and not settings.METRICS_REQUIRE_TOKEN and _behind_proxy():
        hint = HINT + " Then set COSTPLATFORM_METRICS_ALLOW= (empty), or keep the proxy from forwarding /metrics."
        found.append(checks.Warning(W_ALLOW_BEHIND_PROXY, hint=hint, id="metrics.W002"))
    return found
