"""Business lines, models and findings come from callers' records: one named like a markdown
link, a Slack mention or @all reaches every kind of channel as text a person can read and the
chat will not turn into a link or a ping. Sent through the real delivery path to loopback
receivers (and Django's mail outbox)."""

from __future__ import annotations

import html
import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from apps.alerts import services
from apps.alerts.messages import ZWSP, markup, plain
from apps.alerts.models import Alert, Notification, Severity
from apps.audits.models import AuditFinding, AuditReport
from apps.audits.services import report_broadcast
from tests import factories

pytestmark = pytest.mark.django_db
LINE = "[click](http://evil.example/login) <!channel> @all <at id=all></at>"
MODEL = "<http://evil.example|open> @here @channel <@U024BE7LH> www.evil.example"
# What must not reach a chat: link syntax, mention syntax, a clickable address.
LIVE = (
    "](",
    "http://evil",
    "<!channel>",
    "<at id=all>",
    "<http",
    "<@U",
    "@all",
    "@here",
    "@channel",
    "www.evil",
)
WEBHOOKS = ["slack", "feishu", "dingtalk", "wecom", "webhook"]


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def read_back(text: str) -> str:
    """What a person sees: the chat decodes the entities; the zero-width spaces are invisible."""
    return html.unescape(text.replace(ZWSP, ""))


def assert_inert(texts: list[str]) -> None:
    for text in texts:
        for live in LIVE:
            assert live not in text.replace("](" + "http://localhost", ""), (live, text)


def finding_alert() -> None:
    """A month-end finding about the hostile line, as evaluation writes it, routed to the channels."""
    alert = Alert.objects.create(
        dedup_key="rule:1:x:1:event",
        kind="ledger_finding",
        status=Alert.Status.EVENT,
        severity=Severity.WARNING,
        subject=LINE,
        figures={"message": f"no revenue for {LINE} on {MODEL}", "period": "2026-11"},
        link="/api/v1/ledger/findings?period=2026-11",
        created_at=timezone.now(),
    )
    deliver(services.alert_route(alert=alert))


def deliver(notifications: list[Notification]) -> None:
    for n in notifications:
        services.notification_send(notification_id=n.id, retry_delays=[1.0])


@pytest.mark.parametrize("kind", WEBHOOKS)
def test_it_sends_a_hostile_line_and_model_as_inert_text(receiver, kind: str) -> None:
    factories.channel(kind, url=receiver.url(), language="en")

    finding_alert()

    [got] = receiver.wait_for(1)
    texts = strings(got.json())
    assert_inert(texts)
    seen = read_back("\n".join(texts))
    assert LINE in seen and MODEL in seen  # still there for a person to read


def test_it_sends_a_hostile_line_and_model_as_inert_text_by_email() -> None:
    factories.channel("email", email_to="finance@example.com", language="en")

    finding_alert()

    [email] = mail.outbox
    assert_inert([email.subject, email.body])
    assert LINE in read_back(email.subject) and MODEL in read_back(email.body)


@pytest.mark.parametrize("kind", WEBHOOKS)
def test_it_sends_the_audit_summary_of_a_hostile_line_as_inert_text(receiver, kind: str) -> None:
    factories.channel(kind, url=receiver.url(), language="en")
    at = datetime(2026, 12, 1, 4, tzinfo=UTC)
    report = AuditReport.objects.create(
        month=date(2026, 11, 1), currency="CNY", tokens=10, savings_tokens=5, started_at=at, finished_at=at
    )
    AuditFinding.objects.create(
        report=report,
        position=1,
        kind="zombie",
        title=f"Zombie workload: {MODEL}",
        dims={"business_line": LINE},
        model=MODEL,
        tokens=10,
        savings_tokens=5,
    )

    assert report_broadcast(report_id=report.pk) == 2  # everyone's summary and the line's
    deliver(list(Notification.objects.order_by("id")))

    received = receiver.wait_for(2)
    for got in received:
        texts = strings(got.json())
        assert_inert(texts)
        assert MODEL in read_back("\n".join(texts))
    assert any(LINE in read_back(json.dumps(got.json(), ensure_ascii=False)) for got in received)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("[x](http://e)", f"[x]{ZWSP}(http:{ZWSP}//e)"),
        ("<!here> & @all", f"&lt;!here&gt; &amp; @{ZWSP}all"),
        ("[x]: http://e", f"[x]{ZWSP}: http:{ZWSP}//e"),
        ("search-2 / qwen2.5-7b", "search-2 / qwen2.5-7b"),
    ],
)
def test_it_escapes_markup_and_leaves_plain_names_alone(given: str, shown: str) -> None:
    assert markup(given) == shown
    assert plain("<!here> @all www.e.com") == f"<{ZWSP}!here> @{ZWSP}all www{ZWSP}.e.com"
