"""Password guessing: after COSTPLATFORM_LOGIN_FAILURE_LIMIT wrong passwords (5) the username is
locked out, on the login page and over HTTP basic auth alike: the right password is refused
until the cool-off (15 minutes) ends, and the lockout is in the audit log and the log."""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client

from apps.auditlog.models import AuditEntry
from tests import factories

pytestmark = pytest.mark.django_db
# The lock is timed from the real clock's hour: a session made at START expires 14 days later,
# which must still be ahead of the real clock when the test reads it back.
START = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
PASSWORD = "pw-for-tests-only"  # factories.finance_user's
API = "/api/v1/ledger/accounts"


@pytest.fixture
def alice() -> Any:
    return factories.finance_user("alice", role="finance")


def log_in(browser: Client, password: str) -> Any:
    return browser.post("/login/", {"username": "alice", "password": password})


def basic(password: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()}


def lockouts() -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(model="auth.User", changes__has_key="locked_out"))


def test_it_locks_out_the_login_page_after_five_wrong_passwords(alice: Any, caplog: Any) -> None:
    browser = Client()
    with time_machine.travel(START, tick=False), caplog.at_level(logging.INFO, "costplatform.security"):
        answers = [log_in(browser, "wrong").status_code for _ in range(5)]
        refused = log_in(browser, PASSWORD)

    assert answers == [200, 200, 200, 200, 429]  # the form again four times, then the lock
    assert refused.status_code == 429 and "_auth_user_id" not in browser.session
    [entry] = lockouts()
    assert (entry.object_id, entry.object_repr, entry.path) == (str(alice.pk), "alice", "/login/")
    assert entry.action == "update" and entry.changes == {"locked_out": [False, True]}
    assert entry.after["failures"] == 5 and entry.after["ip_address"] == "127.0.0.1"
    assert entry.after["until"] == (START + timedelta(minutes=15)).isoformat()
    assert "login locked out: 'alice' after 5 failed attempts" in caplog.text
    assert "login refused: 'alice' is locked out" in caplog.text  # the right password, refused: logged only

    with time_machine.travel(START + timedelta(minutes=16), tick=False):
        assert log_in(browser, PASSWORD).status_code == 302  # the cool-off is over
        assert browser.session["_auth_user_id"] == str(alice.pk)
    assert len(lockouts()) == 1


def test_it_locks_out_http_basic_auth_after_five_wrong_passwords(alice: Any) -> None:
    client = Client()
    with time_machine.travel(START, tick=False):
        assert client.get(API, **basic(PASSWORD)).status_code == 200
        answers = {client.get(API, **basic("wrong")).status_code for _ in range(5)}
        refused = client.get(API, **basic(PASSWORD))

    assert answers <= {401, 403} and refused.status_code in (401, 403)
    [entry] = lockouts()
    assert (entry.object_id, entry.path, entry.after["failures"]) == (str(alice.pk), API, 5)
    with time_machine.travel(START + timedelta(minutes=16), tick=False):
        assert client.get(API, **basic(PASSWORD)).status_code == 200


def test_it_locks_out_a_username_that_has_no_account(alice: Any) -> None:
    # Guessing which accounts exist gains nothing: the lock looks the same, and is logged.
    browser = Client()
    with time_machine.travel(START, tick=False):
        answers = [browser.post("/login/", {"username": "mallory", "password": "x"}).status_code for _ in range(5)]

    assert answers[-1] == 429
    [entry] = lockouts()
    assert (entry.object_id, entry.object_repr) == ("", "mallory")
    assert log_in(Client(), PASSWORD).status_code == 302  # alice is not locked by it
