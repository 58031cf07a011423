"""GET /metrics: the Prometheus text exposition, for a bearer token or an allowed address."""

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


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not (_token_ok(request) or _address_ok(request)):
        return HttpResponse(ERR_FORBIDDEN, status=403, content_type="text/plain; charset=utf-8")
    body = generate_latest(_process_registry()) + generate_latest(_platform_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
