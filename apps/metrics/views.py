"""GET /metrics: the Prometheus text exposition, for a bearer token or an allowed address.
With COSTPLATFORM_METRICS_REQUIRE_TOKEN (on by default with HTTPS=true, where the client
address is the proxy's) only the token serves a scrape; so does a request that came through a
proxy (it carries Forwarded, X-Forwarded-For, X-Real-IP or Via): its address is the proxy's,
e.g. loopback for a reverse proxy on the same host, whatever client sent it."""

from __future__ import annotations

import ipaddress
import os
import secrets

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from apps.ingest.metrics import PROCESS_REGISTRY
from apps.metrics.collector import platform_collector

ERR_FORBIDDEN = (
    "/metrics needs Authorization: Bearer <COSTPLATFORM_METRICS_TOKEN>, or a client address in "
    "COSTPLATFORM_METRICS_ALLOW (docs/metrics.md)\n"
)

ERR_TOKEN_REQUIRED = (
    "/metrics needs Authorization: Bearer <COSTPLATFORM_METRICS_TOKEN> here: COSTPLATFORM_METRICS_REQUIRE_TOKEN "
    "is on (the default with HTTPS=true), so a client address alone is not enough (docs/metrics.md)\n"
)
ERR_PROXIED = (
    "/metrics needs Authorization: Bearer <COSTPLATFORM_METRICS_TOKEN> for a scrape that came through a proxy "
    "(Forwarded, X-Forwarded-For, X-Real-IP or Via): its client address is the proxy's (docs/metrics.md)\n"
)
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP", "Via")
ERR_TOKEN_UNSET = (
    "/metrics is closed: COSTPLATFORM_METRICS_REQUIRE_TOKEN is on (the default with HTTPS=true) and "
    "COSTPLATFORM_METRICS_TOKEN is not set; set it and scrape with Authorization: Bearer <token> (docs/metrics.md)\n"
)

_platform_registry = CollectorRegistry(auto_describe=False)
_platform_registry.register(platform_collector)


def _token_ok(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and secrets.compare_digest(given.strip(), token)


def _address_ok(request: HttpRequest) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(cidr, strict=False) for cidr in settings.METRICS_ALLOW)


def _process_registry() -> CollectorRegistry:
    """The ingest counters: this process's, or every worker's under PROMETHEUS_MULTIPROC_DIR."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return PROCESS_REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def _refusal(request: HttpRequest) -> str:
    """Why this scrape is refused, or "" to serve it."""
    if _token_ok(request):
        return ""
    if settings.METRICS_REQUIRE_TOKEN:
        return ERR_TOKEN_REQUIRED if settings.METRICS_TOKEN else ERR_TOKEN_UNSET
    if any(name in request.headers for name in PROXY_HEADERS):
        return ERR_PROXIED
    return "" if _address_ok(request) else ERR_FORBIDDEN


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused:
        return HttpResponse(refused, status=403, content_type="text/plain; charset=utf-8")
    body = generate_latest(_process_registry()) + generate_latest(_platform_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
