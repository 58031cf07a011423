"""Who may read /metrics when the token is required (the default with HTTPS=true, proven in a
production process by tests/security/test_deploy.py), and the system checks that flag an open
scrape: a required token that is not set, an address allow-list behind a proxy."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import Client

from apps.metrics.checks import metrics_access

pytestmark = pytest.mark.django_db
TOKEN = "scrape-token-for-tests"


@pytest.fixture
def required(settings: Any) -> Any:
    settings.METRICS_REQUIRE_TOKEN = True
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOW = ["127.0.0.1/32"]
    return settings


def test_it_refuses_an_allowed_address_without_the_token_when_the_token_is_required(required: Any) -> None:
    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")

    assert response.status_code == 403
    assert "COSTPLATFORM_METRICS_REQUIRE_TOKEN" in response.content.decode()


def test_it_refuses_a_wrong_token_when_the_token_is_required(required: Any) -> None:
    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer not-it")

    assert response.status_code == 403


def test_it_serves_the_token_when_the_token_is_required(required: Any) -> None:
    response = Client().get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 200 and b"costplatform_" in response.content


def test_it_refuses_every_scrape_with_a_clear_reason_when_the_required_token_is_unset(required: Any) -> None:
    required.METRICS_TOKEN = ""

    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer ")

    assert response.status_code == 403
    assert "COSTPLATFORM_METRICS_TOKEN is not set" in response.content.decode()
    assert [m.id for m in metrics_access()] == ["metrics.W001"]


def test_it_warns_of_an_address_allow_list_behind_a_proxy(settings: Any) -> None:
    settings.METRICS_REQUIRE_TOKEN = False
    settings.METRICS_ALLOW = ["127.0.0.1/32"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    found = {m.id: m for m in run_checks(tags=["security"])}

    assert "metrics.W002" in found and "proxy's address" in found["metrics.W002"].msg


def test_it_does_not_warn_without_a_proxy_or_with_the_token_required(settings: Any) -> None:
    settings.METRICS_ALLOW = ["127.0.0.1/32"]
    settings.METRICS_TOKEN = TOKEN
    settings.SECURE_PROXY_SSL_HEADER = None
    settings.HTTPS = False
    settings.METRICS_REQUIRE_TOKEN = False
    assert metrics_access() == []

    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.METRICS_REQUIRE_TOKEN = True
    assert metrics_access() == []


@pytest.mark.parametrize(
    "forwarded",
    [
        {"HTTP_X_FORWARDED_FOR": "203.0.113.9"},
        {"HTTP_FORWARDED": "for=203.0.113.9;proto=http"},
        {"HTTP_X_REAL_IP": "203.0.113.9"},
        {"HTTP_VIA": "1.1 nginx"},
    ],
)
def test_a_scrape_through_a_same_host_proxy_needs_the_token_without_https(settings: Any, forwarded: dict) -> None:
    """Issue 31, a Low: with HTTPS=false /metrics served anything arriving from loopback, e.g.
    every client of a reverse proxy on the same host."""
    settings.HTTPS, settings.METRICS_REQUIRE_TOKEN = False, False
    settings.METRICS_TOKEN, settings.METRICS_ALLOW = TOKEN, ["127.0.0.1/32"]

    proxied = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", **forwarded)
    with_token = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **forwarded)
    direct = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")

    assert (proxied.status_code, with_token.status_code, direct.status_code) == (403, 200, 200)
    assert b"through a proxy" in proxied.content
