"""Collector keys and channel secrets: no plaintext in any database row and none in the logs
(every logger at DEBUG, SQL with its parameters included) while keys are made, used, mistyped
and revoked, and while alerts are delivered, fail and disable their channel."""

from __future__ import annotations

import io
import logging
import secrets
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_revoke
from apps.alerts import services as alerts
from apps.alerts.models import Channel
from tests import factories
from tests.alerts.receivers import Receiver
from tests.conftest import Collector

pytestmark = pytest.mark.django_db


def rows_containing(text: str) -> list[str]:
    """Every table (and how many rows) whose row text holds `text`, plain or as hex bytes."""
    connection.force_debug_cursor = False  # the scan's own queries hold the text
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT quote_ident(table_name) FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
        tables = [name for (name,) in cursor.fetchall()]
        found = []
        for table in tables:
            cursor.execute(
                f"SELECT count(*) FROM {table} AS r WHERE strpos(r::text, %s) > 0 OR strpos(r::text, %s) > 0",
                [text, text.encode().hex()],
            )
            (count,) = cursor.fetchone()
            if count:
                found.append(f"{table}: {count}")
    assert "accounts_collectorkey" in tables and "alerts_channel" in tables  # the scan sees them
    return found


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django")
    connection.force_debug_cursor = True  # django.db.backends logs each query and its parameters
    yield caplog
    connection.force_debug_cursor = False


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    settings.ALERTS_OUTBOUND_ALLOW = ["127.0.0.1/32"]
    found = Receiver()
    yield found
    found.close()


def test_collector_keys_leave_no_plaintext_in_rows_or_logs(everything_logged, admin_client):
    out = io.StringIO()
    call_command("create_collector_key", "--name", "edge-7", stdout=out)
    secret = out.getvalue().strip()  # shown once, to the operator, on stdout
    assert secret.startswith("cpk_")
    wrong = "cpk_" + secrets.token_urlsafe(32)

    sender = Collector(Client(), secret)
    assert sender.send([factories.record() for _ in range(3)]).status_code == 200
    assert sender.post(b'{"records": [', content_type="application/json").status_code == 400
    refused = Collector(Client(), wrong).send([factories.record()])
    assert refused.status_code == 401 and wrong not in refused.content.decode()
    key = CollectorKey.objects.get(name="edge-7")
    edited = {"name": "edge-7", "rate_requests": "50", "backdate_days": "3"}
    assert admin_client.post(f"/admin/accounts/collectorkey/{key.pk}/change/", edited).status_code == 302
    collector_key_revoke(name="edge-7")
    assert Collector(Client(), secret).send([factories.record()]).status_code == 401

    logged = everything_logged.text
    assert "SELECT" in logged  # the SQL was logged, parameters and all
    for text in (secret, wrong):
        assert text not in logged
        assert rows_containing(text) == []
    # The scan does find what is there: the 10-character prefix is kept, by design, to name the key.
    assert "accounts_collectorkey: 1" in rows_containing(secret[:10])


def test_channel_secrets_leave_no_plaintext_in_rows_or_logs(everything_logged, receiver):
    token = secrets.token_hex(16)
    signing = "SEC" + secrets.token_hex(16)
    hook = "whsec-" + secrets.token_hex(16)
    factories.channel("slack", url=receiver.url(f"/services/T0/B0/{token}"))
    factories.channel("dingtalk", url=receiver.url(f"/robot/send?access_token={token}"), secret=signing)
    factories.channel("webhook", url=receiver.url(f"/hooks/{token}"), secret=hook)
    broken = factories.channel("feishu", url=f"http://127.0.0.1:1/open-apis/bot/v2/hook/{token}", secret=signing)

    receiver.answers.extend([(200, {"ok": True}), (500, {"error": "down"})])
    retries = [1.0]
    sent = alerts.broadcast(
        title="Spend spike", body_markdown="**search** +80 %", link="/alerts/", business_line=None,
        severity="critical", kind="audit",
    )  # fmt: skip
    for notification in sent:
        alerts.notification_send(notification_id=notification.id, retry_delays=retries)
    receiver.answers.append((404, b"no_service"))  # a permanent error disables the channel
    alerts.notification_send(
        notification_id=alerts.channel_send_test(channel=Channel.objects.get(kind="slack")).id, retry_delays=retries
    )

    assert len(receiver.received) >= 3 and any(token in r.path or token in str(r.query) for r in receiver.received)
    assert Channel.objects.filter(disabled_at__isnull=False).exists()
    assert Channel.objects.get(pk=broken.pk).secret == signing  # still readable by the platform
    logged = everything_logged.text
    assert "SELECT" in logged and "alerts_notification" in logged
    for text in (token, signing, hook):
        assert text not in logged
        assert rows_containing(text) == []
