"""The operations side of the demo: the closed month audited, the built-in alert rules evaluated
over the demo's traffic, and what fired (the audit's summaries too) delivered to one chat channel
of each kind, so the alerts history and the channels page show real messages; and a second
collector, an old SDK that counts cached tokens outside the prompt, whose records are refused,
so the collectors page shows a key in use and its rejections; and a supplier whose bill of the
closed month reconciles but for one planted difference.

The messages go to a receiver on loopback that lives only while the demo is built (the demo
reaches no chat provider); the demo's channels are then disabled with a note saying so, so the
running platform never posts to a dead address. An admin sets a real webhook URL and enables a
channel (admin action Enable) to use it. One channel stays enabled: email to the local mailbox
(without EMAIL_HOST, a file a message under the data dir), so alerts keep arriving somewhere real.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (name, kind, language, business lines): one channel of each chat kind.
CHANNELS: tuple[tuple[str, str, str, list[str]], ...] = (
    ("客服值班 (钉钉)", "dingtalk", "zh-hans", ["customer-service"]),
    ("搜索团队 (飞书)", "feishu", "zh-hans", ["search"]),
    ("市场营销 (企业微信)", "wecom", "zh-hans", ["marketing"]),
    ("Platform on-call (Slack)", "slack", "en", []),
    ("Finance tools (webhook)", "webhook", "en", []),
)
# A channel that stays enabled: email to the local mailbox (without EMAIL_HOST, a file per message
# under the data dir), so the running platform keeps delivering the demo's alerts somewhere real.
LOCAL_CHANNEL = ("On-call mailbox (local)", "oncall@localhost")
RECEIVER_GONE = (
    "demo channel: its receiver ran only while `make demo-data` built the demo; "
    "set the real webhook URL and enable it (admin action Enable)"
)
DEMO_ACKNOWLEDGER = "demo-oncall"
LEGACY_KEY = "legacy-sdk"


class _Handler(BaseHTTPRequestHandler):
    received: list[bytes]

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        body = json.dumps({"code": 0, "errcode": 0, "msg": "ok"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A chat provider stand-in on loopback: (its base URL, the bodies it received)."""
    received: list[bytes] = []
    handler = type("Handler", (_Handler,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _delivered_here() -> Iterator[None]:
    """Deliveries run in this process as they are queued (no worker is running), to loopback."""
    from django.test import override_settings

    from costplatform.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with override_settings(ALERTS_OUTBOUND_ALLOW=["127.0.0.1/32"]):
            yield
    finally:
        app.conf.task_always_eager = eager


def _channels(url: str) -> list[Any]:
    from apps.alerts.models import Channel

    made = []
    for name, kind, language, lines in CHANNELS:
        channel, _ = Channel.objects.update_or_create(
            name=name,
            defaults={
                "kind": kind,
                "language": language,
                "url": f"{url}/{kind}",
                "secret": "demo-secret" if kind in ("dingtalk", "feishu", "webhook") else "",
                "business_lines": lines,
                "disabled_at": None,
                "disabled_reason": "",
            },
        )
        made.append(channel)
    return made


def _local_channel() -> Any:
    from apps.alerts.models import Channel

    name, address = LOCAL_CHANNEL
    channel, _ = Channel.objects.update_or_create(
        name=name,
        defaults={"kind": "email", "language": "en", "email_to": address, "disabled_at": None, "disabled_reason": ""},
    )
    return channel


def demo_alerts(*, audited: date, now: datetime) -> list[str]:
    """Audit `audited` (a closed month), evaluate every enabled rule at `now` and deliver what
    fired and the audit's summaries to the demo channels; once: alerts already there are kept."""
    from django.conf import settings

    from apps.alerts.evaluation import rule_evaluate
    from apps.alerts.models import Alert, Notification, Rule
    from apps.alerts.services import alert_act, channel_disable, notification_send, notifications_due
    from apps.audits.services import audit_run, report_broadcast
    from devtools.demo_data import demo_user

    if Alert.objects.exclude(kind="test").exists():
        return ["alerts: kept as they were"]
    report = audit_run(month=audited)
    with _receiver() as (url, received), _delivered_here():
        channels = _channels(url)
        local = _local_channel()
        fired = [
            alert for rule in Rule.objects.filter(enabled=True) for alert in rule_evaluate(rule_id=rule.id, now=now)
        ]
        summaries = report_broadcast(report_id=report.id)
        for notification_id in notifications_due():  # any a queue would hold (inside a test's transaction)
            notification_send(notification_id=notification_id, retry_delays=[])
    for channel in channels:
        channel_disable(channel=channel, reason=RECEIVER_GONE)
    first = Alert.objects.exclude(kind="test").order_by("created_at").first()
    if first is not None:
        alert_act(alert=first, action="ack", user=demo_user(DEMO_ACKNOWLEDGER), now=now)
    failed = Notification.objects.filter(status=Notification.Status.FAILED).values_list("channel__kind", "error")
    return [
        *(f"alerts: a delivery to the {kind} channel failed: {error}" for kind, error in failed),
        f"audit {audited:%Y-%m}: {report.findings.count()} findings, {report.savings_tokens:,} tokens to save",
        f"alerts: {len(fired)} fired now, {summaries} audit summaries; {len(received)} messages delivered to "
        f"{len(channels)} demo channels (one of each chat kind), which are left disabled",
        f"alerts: {local.notifications.filter(status=Notification.Status.SENT).count()} delivered to the enabled "
        f"channel {local.name!r}: email to {local.email_to}, a file a message under {settings.EMAIL_FILE_PATH}"
        if settings.EMAIL_BACKEND.endswith("filebased.EmailBackend")
        else f"alerts: the channel {local.name!r} emails {local.email_to} through {settings.EMAIL_HOST}",
    ]


def legacy_collector(*, now: datetime) -> list[str]:
    """A collector key `legacy-sdk`, used through the key check the API runs (so it shows as
    seen), whose batch mixes one good record with three the contract refuses: cached prompt
    tokens beyond the prompt (the exclusive convention), a negative count, no timestamp. Once."""
    from apps.accounts.models import CollectorKey
    from apps.accounts.services import collector_key_authenticate, collector_key_create
    from apps.ingest.services import batch_ingest

    if CollectorKey.objects.filter(name=LEGACY_KEY).exists():
        return [f"collector {LEGACY_KEY}: kept as it was"]
    key = collector_key_authenticate(secret=collector_key_create(name=LEGACY_KEY).secret)
    assert key is not None  # just made
    at = (now - timedelta(minutes=20)).isoformat()
    base = {"ts": at, "model": "qwen2.5-7b-instruct", "dims": {"business_line": "search", "feature": "autocomplete"}}
    records = [
        {**base, "record_id": "legacy-1", "tokens": {"prompt": 300, "completion": 20}, "outcome": {"status": "ok"}},
        {**base, "record_id": "legacy-2", "tokens": {"prompt": 120, "prompt_cached": 480, "completion": 20},
         "outcome": {"status": "ok"}},
        {**base, "record_id": "legacy-3", "tokens": {"prompt": 300, "completion": -5}, "outcome": {"status": "ok"}},
        {"record_id": "legacy-4", "model": "qwen2.5-7b-instruct", "tokens": {"prompt": 300, "completion": 20},
         "outcome": {"status": "ok"}},
    ]  # fmt: skip
    result = batch_ingest(key=key, body=json.dumps({"records": records}).encode(), ndjson=False)
    return [
        f"collector {LEGACY_KEY}: {result.accepted} record stored, {len(result.rejected)} refused (see /collectors/)"
    ]


SUPPLIER = "DeepSeek"
# The one difference planted in the supplier's bill: a day billed more than the platform priced.
PLANTED_DAY, PLANTED_AMOUNT = 12, Decimal("42.00")


def supplier_bill(*, month: date) -> list[str]:
    """A hosted supplier (DeepSeek, serving deepseek-chat) and its bill of `month` (open), written
    from the platform's own figures day by day, so it reconciles, but for one planted difference:
    the 12th billed 42.00 CNY more than the platform priced (the reconciliation page shows it,
    the close's supplier bills line names it). Once: a bill already there is kept."""
    from apps.reconciliation.imports import bill_import
    from apps.reconciliation.matching import platform_side, supplier_reconcile
    from apps.reconciliation.models import Bill, Supplier

    supplier, _ = Supplier.objects.get_or_create(
        name=SUPPLIER,
        defaults={
            "kind": Supplier.Kind.HOSTED,
            "currency": "CNY",
            "model_patterns": ["deepseek-chat"],
            "col_day": "date",
            "col_model": "model",
            "col_input_tokens": "input_tokens",
            "col_output_tokens": "output_tokens",
            "col_amount": "amount",
        },
    )
    if Bill.objects.filter(supplier=supplier, month=month).exists():
        return [f"supplier {SUPPLIER}: the bill of {month:%Y-%m} kept as it was"]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["date", "model", "input_tokens", "output_tokens", "amount"])
    for (day, model, _key), side in sorted(platform_side(supplier, month).items()):
        amount = side.amount.quantize(Decimal("0.01")) + (PLANTED_AMOUNT if day.day == PLANTED_DAY else 0)
        writer.writerow([f"{day:%Y-%m-%d}", model, side.input_tokens, side.output_tokens, f"{amount}"])
    result = bill_import(
        supplier=supplier, month=month, content=out.getvalue().encode(), filename=f"deepseek-{month:%Y-%m}.csv"
    )
    if not result.accepted:
        return [f"supplier {SUPPLIER}: the demo's bill was refused: {[e.reason for e in result.errors][:3]}"]
    found = supplier_reconcile(supplier=supplier, month=month)
    return [
        f"supplier {SUPPLIER}: bill of {month:%Y-%m} imported ({result.bill.rows} rows, {result.bill.total} CNY); "
        f"{len(found.open)} open difference, {found.unreconciled} CNY (planted on the {PLANTED_DAY}th)"
    ]
