"""Single sign-on against a real OpenID Connect provider: django-oauth-toolkit's, a small Django
project (tests/accounts/oidc_provider/) started on loopback with an RSA key made here. The
authorization-code flow is walked with httpx against the live platform: the platform's login
page, the provider's login form, the callback, then the pages and APIs as that user."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User

from apps.accounts.models import UserScope
from apps.auditlog.models import AuditEntry
from tests.factories import record

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "costplatform-test", "client-secret-for-tests-only"
PASSWORD = "provider-pw-for-tests-only"
GROUP_ROLES = {"cost-admins": "admin", "cost-finance": "finance", "cost-engineers": "engineer"}
USERS = {
    "ann": ["cost-finance", "line:*"],  # every line, said explicitly (COSTPLATFORM_OIDC_ALL_LINES)
    "sam": ["cost-engineers", "line:search"],
    "nobody": ["marketing"],  # no group that maps to a role
    "lena": ["cost-engineers"],  # a role, no business line
}
T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
WINDOW = {"from": (T0 - timedelta(hours=1)).isoformat(), "to": (T0 + timedelta(hours=2)).isoformat()}


@dataclass(frozen=True)
class Provider:
    issuer: str
    env: dict[str, str]

    def groups_set(self, username: str, groups: list[str]) -> None:
        """Change a user's groups at the provider (between two logins)."""
        setup = {"users": [{"username": username, "password": PASSWORD, "groups": groups}]}
        django_run(["-m", "tests.accounts.oidc_provider.setup"], self.env | {"OIDC_PROVIDER_SETUP": json.dumps(setup)})


def django_run(args: list[str], env: dict[str, str]) -> None:
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def provider(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    work = tmp_path_factory.mktemp("oidc-provider")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (work / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "DATABASE_", "COSTPLATFORM_"))
    } | {
        "DJANGO_SETTINGS_MODULE": "tests.accounts.oidc_provider.settings",
        "OIDC_PROVIDER_DB": str(work / "provider.sqlite3"),
        "OIDC_PROVIDER_KEY_FILE": str(work / "key.pem"),
        "PYTHONPATH": str(ROOT),
    }
    setup = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uri": f"{live_server.url}/oidc/callback/",
        "users": [{"username": name, "password": PASSWORD, "groups": groups} for name, groups in USERS.items()],
    }
    django_run(["-m", "django", "migrate", "--noinput"], env)
    django_run(["-m", "tests.accounts.oidc_provider.setup"], env | {"OIDC_PROVIDER_SETUP": json.dumps(setup)})
    port = free_port()
    log = (work / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    issuer = f"http://127.0.0.1:{port}/o"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{issuer}/.well-known/openid-configuration").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (work / "server.log").read_text()
            time.sleep(0.2)
        yield Provider(issuer=issuer, env=env)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture
def sso(provider: Provider, settings: Any, truncate_records: None) -> Provider:
    """Single sign-on configured (settings are shared with the live server's thread)."""
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_GROUP_ROLES = GROUP_ROLES
    settings.OIDC_PROVIDER_NAME = "Example ID"
    return provider


def sso_login(site: str, username: str) -> tuple[httpx.Client, httpx.Response]:
    """The flow a browser follows: the platform's button, the provider's login form, back to
    the platform's callback. Returns the client (its cookies) and the last answer."""
    client = httpx.Client(timeout=30, follow_redirects=True)
    form = client.get(f"{site}/oidc/authenticate/")
    assert form.status_code == 200 and form.url.path == "/login/", form.text  # the provider's
    answer = client.post(
        str(form.url),
        data={
            "username": username,
            "password": PASSWORD,
            "next": form.url.params["next"],
            "csrfmiddlewaretoken": client.cookies["provider_csrftoken"],
        },
    )
    return client, answer


def send_two_lines(collector: Any) -> None:
    at = {"ts": (T0 + timedelta(minutes=10)).isoformat(), "prompt_hash": None}
    collector.send(
        [
            record(**at, dims={"business_line": "support", "feature": "faq"}),
            record(**at, dims={"business_line": "search", "feature": "rank"}),
        ]
    )


def lines_seen(client: httpx.Client, site: str) -> set[str]:
    answer = client.get(f"{site}/api/v1/records?{urlencode(WINDOW)}")
    assert answer.status_code == 200, answer.text
    return {row["dims"]["business_line"] for row in answer.json()["results"]}


def roles_of(username: str) -> list[str]:
    user = User.objects.get(username=username)
    return sorted(user.groups.values_list("name", flat=True))


def test_it_logs_a_user_in_through_the_provider_with_the_mapped_role(sso, live_server, collector) -> None:
    send_two_lines(collector)
    client, answer = sso_login(live_server.url, "ann")

    assert answer.status_code == 200 and answer.url.path == "/", answer.text
    user = User.objects.get(username__startswith="oidc:", email="ann@example.org")
    assert roles_of(user.username) == ["finance"]
    assert not user.has_usable_password()
    assert lines_seen(client, live_server.url) == {"search", "support"}
    assert client.get(f"{live_server.url}/finance/").status_code == 200  # a page of the finance role
    entry = AuditEntry.objects.get(model="auth.User", object_id=str(user.pk))
    assert entry.changes == {"roles": [[], ["finance"]]}
    assert entry.path == "/oidc/callback/"


def test_it_scopes_a_user_to_the_business_lines_of_their_claims(sso, live_server, collector) -> None:
    send_two_lines(collector)
    client, answer = sso_login(live_server.url, "sam")

    assert answer.url.path == "/", answer.text
    user = User.objects.get(email="sam@example.org")
    assert roles_of(user.username) == ["engineer"]
    assert UserScope.objects.get(user=user).business_lines == ["search"]
    assert lines_seen(client, live_server.url) == {"search"}
    overview = client.get(f"{live_server.url}/overview/")
    assert overview.status_code == 200 and "search" in overview.text and "support" not in overview.text
    assert AuditEntry.objects.filter(model="accounts.UserScope", action="create").count() == 1


def test_it_reads_the_claims_again_at_every_login(sso, live_server, collector) -> None:
    send_two_lines(collector)
    sso_login(live_server.url, "sam")
    try:
        sso.groups_set("sam", ["cost-finance", "line:support"])
        client, answer = sso_login(live_server.url, "sam")
        user = User.objects.get(email="sam@example.org")
        assert answer.url.path == "/"
        assert roles_of(user.username) == ["finance"]  # no longer engineer
        assert UserScope.objects.get(user=user).business_lines == ["support"]
        assert lines_seen(client, live_server.url) == {"support"}
        assert AuditEntry.objects.filter(model="accounts.UserScope", action="update").get().changes == {
            "business_lines": [["search"], ["support"]]
        }

        sso.groups_set("sam", ["line:support"])  # out of every group with a role
        _, refused = sso_login(live_server.url, "sam")
        assert refused.url.path == "/login/" and refused.url.params["sso"] == "refused"
        assert roles_of(user.username) == []
        roles = AuditEntry.objects.filter(model="auth.User", object_id=str(user.pk)).order_by("id")
        assert [entry.changes["roles"][1] for entry in roles] == [["engineer"], ["finance"], []]
    finally:
        sso.groups_set("sam", USERS["sam"])


def test_it_refuses_a_user_with_no_group_that_maps_to_a_role(sso, live_server, settings) -> None:
    client, answer = sso_login(live_server.url, "nobody")

    assert answer.url.path == "/login/" and answer.url.params["sso"] == "refused"
    assert "none of your groups gives a role here" in answer.text
    assert not User.objects.filter(email="nobody@example.org").exists()
    assert client.get(f"{live_server.url}/api/v1/records").status_code in {401, 403}
    for _ in range(settings.AXES_FAILURE_LIMIT):  # refusals are no password guesses: nobody is locked out
        sso_login(live_server.url, "nobody")
    assert sso_login(live_server.url, "ann")[1].url.path == "/"


def test_it_refuses_a_user_whose_lines_claim_is_absent_or_empty_and_keeps_an_admins_scope(
    sso, live_server, collector
) -> None:
    """Issue 31, finding 10: no lines claim meant every line, and overwrote an admin-set scope
    (a person taken out of their last line group gained every line)."""
    send_two_lines(collector)
    _, answer = sso_login(live_server.url, "lena")
    assert answer.url.path == "/login/" and answer.url.params["sso"] == "refused", answer.url
    assert not User.objects.filter(email="lena@example.org").exists()

    sso_login(live_server.url, "sam")
    user = User.objects.get(email="sam@example.org")
    try:
        sso.groups_set("sam", ["cost-engineers"])  # out of the last line group
        client, refused = sso_login(live_server.url, "sam")
        assert refused.url.path == "/login/" and refused.url.params["sso"] == "refused"
        assert UserScope.objects.get(user=user).business_lines == ["search"]  # not widened to every line
        assert roles_of(user.username) == []
        assert client.get(f"{live_server.url}/api/v1/records?{urlencode(WINDOW)}").status_code in {401, 403}
    finally:
        sso.groups_set("sam", USERS["sam"])


def test_it_keeps_local_login_and_shows_the_button_when_on(sso, live_server) -> None:
    User.objects.create_superuser("first-admin", password="local-pw-for-tests-only")
    client = httpx.Client(timeout=30)
    page = client.get(f"{live_server.url}/login/")
    assert "Sign in with Example ID" in page.text
    chinese = client.get(f"{live_server.url}/login/", headers={"Accept-Language": "zh-hans"})
    assert "使用 Example ID 登录" in chinese.text
    answer = client.post(
        f"{live_server.url}/login/",
        data={
            "username": "first-admin",
            "password": "local-pw-for-tests-only",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
        headers={"Referer": f"{live_server.url}/login/"},
    )
    assert answer.status_code == 302 and answer.headers["location"] == "/"


def test_it_is_off_unless_configured(client, db) -> None:
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()


def test_it_keeps_an_sso_session_when_sso_is_turned_off(sso, live_server, settings) -> None:
    client, answer = sso_login(live_server.url, "ann")
    assert answer.url.path == "/"

    settings.OIDC_ISSUER = ""  # the session's backend is the SSO one: it still finds the user
    assert client.get(f"{live_server.url}/api/v1/records?{urlencode(WINDOW)}").status_code == 200
    assert "Sign in with" not in client.get(f"{live_server.url}/login/").text


def test_a_line_the_platform_does_not_know_is_named_to_the_person_and_logged(
    sso, live_server, collector, caplog
) -> None:
    send_two_lines(collector)
    try:
        sso.groups_set("sam", ["cost-engineers", "line:serach"])  # a typo in the provider's groups
        with caplog.at_level(logging.WARNING, logger="apps.accounts.sso"):
            client, answer = sso_login(live_server.url, "sam")
        assert answer.url.path == "/"  # the provider's grant stands
        overview = client.get(f"{live_server.url}/overview/").text
        notice = re.search(r'<p class="scope-notice" role="status" id="scope-unknown">(.*?)</p>', overview, re.S)
        assert notice is not None and "<strong>serach</strong>" in notice.group(1)
        assert "<em>search</em>" in notice.group(1)  # the line it was likely meant to be
        assert any("'serach' (did you mean 'search'?)" in r.getMessage() for r in caplog.records)

        sso.groups_set("sam", USERS["sam"])  # the provider's groups mended: the next login says nothing
        client, _answer = sso_login(live_server.url, "sam")
        assert 'id="scope-unknown"' not in client.get(f"{live_server.url}/overview/").text
    finally:
        sso.groups_set("sam", USERS["sam"])
