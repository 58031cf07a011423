"""Delivery of one alert attempt to real loopback receivers: each provider's payload and
signature, retries, permanent errors, routing, quiet hours and the address guard."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime, time
from urllib.parse import unquote_plus

import pytest
import time_machine
from django.core import mail
from django.db import connection

from apps.alerts import services
from apps.alerts.models import Alert, Channel, Notification
from tests import factories

pytestmark = pytest.mark.django_db
RETRIES = [1.0, 2.0]


def deliver(notifications: list[Notification]) -> list[Notification | None]:
    return [services.notification_send(notification_id=n.id, retry_delays=RETRIES) for n in notifications]


def audit_broadcast(business_line: str | None = "search", severity: str = "warning") -> list[Notification]:
    return services.broadcast(
        title="Token audit 2026-11",
        body_markdown="**Savings**: 1,234 CNY\n- zombie job `nightly-eval`",
        link="/audits/2026-11",
        business_line=business_line,
        severity=severity,
        kind="audit",
    )


def test_it_signs_feishu_cards(receiver):
    factories.channel("feishu", url=receiver.url(), secret="fs-secret")
    with time_machine.travel(datetime(2026, 11, 30, 8, 0, tzinfo=UTC), tick=False):
        deliver(audit_broadcast())
    body = receiver.received[0].json()
    key = f"{body['timestamp']}\nfs-secret".encode()
    assert body["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    assert body["timestamp"] == str(int(datetime(2026, 11, 30, 8, 0, tzinfo=UTC).timestamp()))
    assert body["msg_type"] == "interactive"
    assert body["card"]["header"]["title"]["content"] == "Token audit 2026-11"
    assert "**Savings**: 1,234 CNY" in body["card"]["elements"][0]["text"]["content"]
    assert body["card"]["elements"][1]["actions"][0]["url"] == "http://localhost:8000/audits/2026-11"


def test_it_signs_dingtalk_markdown_in_the_query(receiver):
    factories.channel("dingtalk", url=receiver.url("/robot/send?access_token=tok"), secret="SECdd")
    deliver(audit_broadcast())
    got = receiver.received[0]
    assert got.query["access_token"] == "tok"
    message = f"{got.query['timestamp']}\nSECdd".encode()
    expected = base64.b64encode(hmac.new(b"SECdd", message, hashlib.sha256).digest()).decode()
    assert unquote_plus(got.query["sign"]) == expected or got.query["sign"] == expected
    assert got.json()["msgtype"] == "markdown"
    assert got.json()["markdown"]["title"] == "Token audit 2026-11"
    assert "[Open the page](http://localhost:8000/audits/2026-11)" in got.json()["markdown"]["text"]


def test_it_sends_wecom_markdown(receiver):
    factories.channel("wecom", url=receiver.url("/cgi-bin/webhook/send?key=k1"))
    deliver(audit_broadcast())
    got = receiver.received[0]
    assert got.query == {"key": "k1"}
    assert set(got.json()) == {"msgtype", "markdown"}
    assert "Token audit 2026-11" in got.json()["markdown"]["content"]


def test_it_sends_slack_blocks(receiver):
    factories.channel("slack", url=receiver.url("/services/T/B/X"))
    deliver(audit_broadcast())
    body = receiver.received[0].json()
    assert body["text"] == "Token audit 2026-11"
    assert [b["type"] for b in body["blocks"]] == ["header", "section", "actions"]
    assert "*Savings*: 1,234 CNY" in body["blocks"][1]["text"]["text"]


def test_it_signs_the_generic_webhook_over_timestamp_and_body(receiver):
    factories.channel("webhook", url=receiver.url(), secret="wh-secret")
    deliver(audit_broadcast())
    got = receiver.received[0]
    timestamp = got.headers["X-Costplatform-Timestamp"]
    expected = hmac.new(b"wh-secret", f"{timestamp}.".encode() + got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Costplatform-Signature"] == expected
    assert got.json()["title"] == "Token audit 2026-11"


def test_it_emails_through_the_django_backend(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    factories.channel("email", email_to="oncall@example.com, lead@example.com")
    deliver(audit_broadcast())
    assert mail.outbox[0].to == ["oncall@example.com", "lead@example.com"]
    assert mail.outbox[0].subject == "Token audit 2026-11"
    assert "http://localhost:8000/audits/2026-11" in mail.outbox[0].body


def test_it_stores_urls_and_secrets_encrypted(receiver):
    made = factories.channel("feishu", url=receiver.url(), secret="fs-secret")
    with connection.cursor() as cursor:
        cursor.execute("SELECT url, secret FROM alerts_channel WHERE id = %s", [made.id])
        url, secret = cursor.fetchone()
    assert "127.0.0.1" not in url and "fs-secret" not in secret
    assert Channel.objects.get(id=made.id).secret == "fs-secret"


def test_it_queues_a_retry_after_a_500_and_sends_it(receiver):
    receiver.answers.append((500, {"error": "down"}))
    factories.channel("slack", url=receiver.url())
    [retry] = deliver(audit_broadcast())
    assert retry is not None and retry.attempt == 2
    first = Notification.objects.get(attempt=1)
    assert (first.status, first.error, first.permanent) == ("failed", "HTTP 500", False)
    assert deliver([retry]) == [None]  # not yet due: nothing sent
    with time_machine.travel(retry.due_at, tick=False):
        assert deliver([retry]) == [None]
    assert Notification.objects.get(attempt=2).status == "sent"
    assert len(receiver.received) == 2


def test_it_gives_up_after_the_last_retry(receiver):
    receiver.default = (503, {})
    factories.channel("slack", url=receiver.url())
    pending = audit_broadcast()
    for _ in range(3):
        with time_machine.travel(pending[0].due_at, tick=False):
            pending = [n for n in deliver(pending) if n]
    assert pending == []
    assert list(Notification.objects.order_by("attempt").values_list("status", flat=True)) == ["failed"] * 3


def test_it_disables_the_channel_after_a_permanent_4xx(receiver):
    receiver.answers.append((404, b"no_service"))
    made = factories.channel("slack", url=receiver.url())
    assert deliver(audit_broadcast()) == [None]
    made.refresh_from_db()
    assert made.disabled_at is not None and "HTTP 404: no_service" in made.disabled_reason
    assert audit_broadcast() == []  # a disabled channel gets nothing routed


@pytest.mark.parametrize(
    ("kind", "answer", "permanent"),
    [
        ("feishu", {"code": 19021, "msg": "sign match fail or timestamp is not within one hour from current time"}, 1),
        ("feishu", {"code": 11232, "msg": "frequency limited"}, 0),
        ("dingtalk", {"errcode": 310000, "errmsg": "sign not match"}, 1),
        ("dingtalk", {"errcode": 130101, "errmsg": "send too fast"}, 0),
        ("wecom", {"errcode": 93000, "errmsg": "invalid webhook url"}, 1),
        ("wecom", {"errcode": 45009, "errmsg": "api freq out of limit"}, 0),
    ],
)
def test_it_reads_provider_error_codes_in_a_200(receiver, kind, answer, permanent):
    receiver.answers.append((200, answer))
    made = factories.channel(kind, url=receiver.url(), secret="s")
    [retry] = deliver(audit_broadcast())
    made.refresh_from_db()
    assert (made.disabled_at is not None) == bool(permanent)
    assert (retry is None) == bool(permanent)
    assert str(next(iter(answer.values()))) in Notification.objects.get(attempt=1).error


def test_it_refuses_loopback_and_private_urls_unless_allowed(receiver, settings):
    settings.ALERTS_OUTBOUND_ALLOW = []
    made = factories.channel("webhook", url=receiver.url())
    other = factories.channel("webhook", url="http://10.1.2.3/hook")
    deliver(audit_broadcast())
    assert receiver.received == []
    for channel in (made, other):
        channel.refresh_from_db()
        assert "private or loopback" in channel.disabled_reason


def test_it_routes_by_business_line_and_severity(receiver):
    everyone = factories.channel("slack", url=receiver.url(), min_severity=20)
    search = factories.channel("slack", url=receiver.url(), business_lines=["search"], min_severity=20)
    critical = factories.channel("slack", url=receiver.url(), min_severity=30)
    ads = factories.channel("slack", url=receiver.url(), business_lines=["ads"], min_severity=10)
    assert {n.channel for n in audit_broadcast("search")} == {everyone, search}
    assert {n.channel for n in audit_broadcast(None, "critical")} == {everyone, critical}
    assert {n.channel for n in audit_broadcast("ads", "info")} == {ads}
    assert audit_broadcast("search", "info") == []
    assert Alert.objects.filter(suppressed="no route").count() == 1


def test_it_holds_non_critical_alerts_during_quiet_hours(receiver):
    factories.channel("slack", url=receiver.url(), quiet_start=time(22), quiet_end=time(8), quiet_tz="Asia/Shanghai")
    night = datetime(2026, 11, 30, 15, 30, tzinfo=UTC)  # 23:30 in Shanghai
    with time_machine.travel(night, tick=False):
        [held] = audit_broadcast()
        [urgent] = audit_broadcast(severity="critical")
        assert services.notifications_due() == [urgent.id]
    assert held.due_at == datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # 08:00 in Shanghai
    with time_machine.travel(held.due_at, tick=False):
        assert set(services.notifications_due()) == {held.id, urgent.id}


def test_it_sends_a_test_message_to_one_channel(receiver):
    made = factories.channel("wecom", url=receiver.url(), language="zh-hans", min_severity=30)
    deliver([services.channel_send_test(channel=made)])
    assert "costplatform 测试消息" in receiver.received[0].json()["markdown"]["content"]
