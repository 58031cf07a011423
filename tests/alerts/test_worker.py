"""The whole path with a real Celery worker on Redis: beat's evaluation task fans out per rule,
the spike detector fires, the Alert is routed, and the worker delivers it to real loopback
receivers (and a real SMTP server) that check each provider's payload and signature; a 500
is retried, a 404 disables its channel."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from email import message_from_bytes
from email.header import decode_header, make_header
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from django.conf import settings

from apps.alerts.models import Channel, Notification, Rule
from apps.alerts.tasks import rules_evaluate
from costplatform.celery import app
from tests import factories
from tests.alerts.receivers import Receiver
from tests.alerts.test_evaluation import usage, weekly_baseline
from tests.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd's handler hook
        self.messages.append(envelope.content)
        return "250 OK"


@pytest.fixture
def smtp():
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, mailbox
    controller.stop()


@pytest.fixture
def worker(transactional_db, smtp):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.fail("this test needs CELERY_BROKER_URL=redis://… (make test sets it)")
    app.control.purge()
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "SECRET_KEY": settings.SECRET_KEY,  # the channels' secrets are encrypted with it
        "COSTPLATFORM_OUTBOUND_ALLOW": "127.0.0.1/32",
        "COSTPLATFORM_ALERTS_RETRY_DELAYS": "1,1",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp[0].port),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "costplatform", "worker", "--pool=solo", "--loglevel=INFO",
         "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    yield process
    process.terminate()
    output, _ = process.communicate(timeout=30)
    print(output[-5000:])


def wait(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.2)


def test_a_worker_evaluates_and_delivers_to_every_provider(worker, smtp, settings):
    settings.ALERTS_OUTBOUND_ALLOW = ["127.0.0.1/32"]
    hook, broken, gone = Receiver(), Receiver(), Receiver()
    broken.answers.append((500, {"error": "busy"}))
    gone.default = (404, b"no_service")
    try:
        factories.channel("feishu", url=hook.url("/feishu"), secret="fs-secret", language="zh-hans")
        factories.channel("dingtalk", url=hook.url("/dingtalk?access_token=t"), secret="SECdd")
        factories.channel("wecom", url=hook.url("/wecom?key=k"), language="zh-hans")
        factories.channel("webhook", url=hook.url("/webhook"), secret="wh-secret")
        factories.channel("email", email_to="oncall@example.com")
        factories.channel("slack", url=broken.url("/slack"))
        dead = factories.channel("slack", url=gone.url("/slack"))
        Rule.objects.all().delete()  # the default rules would fire too (per model, ...)
        factories.alert_rule("spike", params={"by": "business_line"})
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        weekly_baseline(10_000)
        usage(hour, 200_000)  # far above any pro-rated baseline whatever the minute

        rules_evaluate.delay()

        wait(lambda: len(hook.received) >= 4 and len(broken.received) >= 2 and smtp[1].messages)
        by_path = {r.path: r for r in hook.received}
        feishu = by_path["/feishu"].json()
        key = f"{feishu['timestamp']}\nfs-secret".encode()
        assert feishu["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        assert feishu["card"]["header"]["title"]["content"] == "词元用量突增:search"
        assert abs(int(feishu["timestamp"]) - time.time()) < 60

        ding = by_path["/dingtalk"]
        signed = f"{ding.query['timestamp']}\nSECdd".encode()
        assert ding.query["sign"] == base64.b64encode(hmac.new(b"SECdd", signed, hashlib.sha256).digest()).decode()
        assert ding.json()["markdown"]["title"] == "Token spike: search"

        assert "词元用量突增:search" in by_path["/wecom"].json()["markdown"]["content"]
        webhook = by_path["/webhook"]
        stamp = webhook.headers["X-Costplatform-Timestamp"]
        digest = hmac.new(b"wh-secret", f"{stamp}.".encode() + webhook.body, hashlib.sha256).hexdigest()
        assert webhook.headers["X-Costplatform-Signature"] == digest
        assert "dims.business_line=search" in webhook.json()["link"]

        email = message_from_bytes(smtp[1].messages[0])
        assert str(make_header(decode_header(email["Subject"]))) == "Token spike: search"

        assert [r.path for r in broken.received] == ["/slack", "/slack"]  # the 500, then the retry
        wait(lambda: Notification.objects.filter(attempt=2, status="sent").exists(), 10)
        assert Notification.objects.filter(channel__kind="slack", attempt=2, status="sent").count() == 1
        wait(lambda: Channel.objects.get(id=dead.id).disabled_at is not None, 10)
        assert "HTTP 404" in Channel.objects.get(id=dead.id).disabled_reason
        assert len(gone.received) == 1  # a permanent error is not retried
    finally:
        for receiver in (hook, broken, gone):
            receiver.close()
