"""Production settings: with the production environment (docs/security.md) `manage.py check
--deploy` is clean, responses carry the security headers and secure cookies, and /metrics
wants its token even from an allowed address."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.db import connection

from tests.processes import database_url_named

ROOT = Path(__file__).resolve().parents[2]
HOST = "cost.example.com"
METRICS_TOKEN = secrets.token_urlsafe(24)

# Inside a process started with the production environment: `check --deploy` (raises on any
# warning), then what responses look like.
PROBE = f"""
import json
from django.conf import settings
from django.core.management import call_command
from django.test import Client

import io
checked = io.StringIO()
call_command("check", deploy=True, fail_level="WARNING", stdout=checked, stderr=checked)

client = Client(HTTP_HOST="{HOST}")
page = client.get("/login/", secure=True)
plain = client.get("/login/")
health = client.get("/healthz")
# From 127.0.0.1, in the default allow-list: behind the proxy that address is everyone's.
metrics = client.get("/metrics")
scraped = client.get("/metrics", HTTP_AUTHORIZATION="Bearer {METRICS_TOKEN}")
csrf = page.cookies["csrftoken"]
print(json.dumps({{
    "status": page.status_code,
    "headers": dict(page.headers),
    "csrf_cookie": {{"secure": bool(csrf["secure"]), "samesite": csrf["samesite"]}},
    "session_cookie": {{"secure": settings.SESSION_COOKIE_SECURE, "httponly": settings.SESSION_COOKIE_HTTPONLY,
                        "samesite": settings.SESSION_COOKIE_SAMESITE}},
    "plain": [plain.status_code, plain.headers.get("Location")],
    "health": health.status_code,
    "metrics": [metrics.status_code, metrics.content.decode()[:200], scraped.status_code],
    "check": checked.getvalue(),
}}))
"""


def production_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE" and not k.startswith("SECURE_")}
    env.update(DEBUG="false", HTTPS="true", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS=HOST)
    env["COSTPLATFORM_METRICS_TOKEN"] = METRICS_TOKEN  # without it `check --deploy` warns (metrics.W001)
    env["COSTPLATFORM_SITE_URL"] = f"https://{HOST}"  # without it the links in alerts lead here (alerts.W001)
    # /healthz reaches the database: the test database, which exists while the test runs.
    env["DATABASE_URL"] = database_url_named(connection.settings_dict["NAME"])
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_deploy_checks_warn_without_it():
    # The test settings are plain HTTP: the same checks are not vacuous.
    found = {message.id for message in run_checks(include_deployment_checks=True)}
    assert {"security.W004", "security.W008", "security.W012", "security.W016"} <= found


@pytest.mark.django_db
def test_check_deploy_is_clean_and_responses_carry_the_security_headers():
    # One process for both: Django takes seconds to start on a busy machine.
    done = manage("shell", "-c", PROBE, env=production_env())
    assert done.returncode == 0, done.stdout + done.stderr  # check --deploy raised nothing
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # The one silenced check is axes.W006, which does not apply to a lock by username (settings.py).
    assert seen["check"].strip() == "System check identified no issues (1 silenced)."
    headers = {name.lower(): value for name, value in seen["headers"].items()}

    assert seen["status"] == 200
    assert headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin"
    assert headers["cross-origin-opener-policy"] == "same-origin"
    assert seen["csrf_cookie"] == {"secure": True, "samesite": "Lax"}
    assert seen["session_cookie"] == {"secure": True, "httponly": True, "samesite": "Lax"}
    assert seen["plain"] == [301, f"https://{HOST}/login/"]  # plain HTTP is sent to HTTPS
    assert seen["health"] == 200  # probes over plain HTTP are exempt
    status, answer, scraped = seen["metrics"]
    assert (status, scraped) == (403, 200) and "COSTPLATFORM_METRICS_TOKEN" in answer
