"""`manage.py demo_data` (make demo-data) on a small month: every workload lands in the class
and reason it should, the month is priced (pool and price book) and accrued, and loading it
again stores nothing new; without --month it builds the previous month, closed with an
approved close request, and the current one in progress."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command
from django.db.models import Max, Min
from django.test import Client
from openpyxl import load_workbook

from apps.accounts.models import CollectorKey
from apps.alerts.detectors.money import health
from apps.alerts.models import AlertAction, Channel, Notification
from apps.alerts.selectors import health_series
from apps.auditlog.models import AuditEntry
from apps.audits.models import AuditReport
from apps.ingest.models import Record, Rejection
from apps.ledger.models import CloseRequest, CostCentre, ElasticWindow, Finding, JournalEntry, JournalLine, Period
from apps.ledger.selectors import trial_balance
from apps.ledger.services.closing import close_checklist, close_history
from apps.plans.models import Budget, Revenue
from apps.pricing.models import PoolIdleHour
from apps.pricing.selectors import class_usage
from apps.reconciliation.matching import month_reconcile
from devtools.demo_ops import CHANNELS, LEGACY_KEY, LOCAL_CHANNEL, PLANTED_AMOUNT, PLANTED_DAY, RECEIVER_GONE

pytestmark = pytest.mark.books_in("UTC")  # its days and months are UTC's

START, END = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def run(records: int) -> str:
    out = io.StringIO()
    call_command("demo_data", "--month", "2026-10", "--records", str(records), stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_demo_data_loads_a_priced_accrued_month_once() -> None:
    with time_machine.travel(datetime(2026, 11, 3, 12, tzinfo=UTC), tick=True):
        first = run(3000)
        stored = re.search(r"loaded ([\d,]+) records: ([\d,]+) stored, ([\d,]+) already there, 0 refused", first)
        assert stored, first
        total, accepted, again = (int(g.replace(",", "")) for g in stored.groups())
        assert total == accepted >= 3000 and again == 0
        for line in ("customer-service", "search", "marketing", "data-platform", "payments", "legal"):
            assert re.search(rf"^  {line} +[\d,]+ ", first, re.M), first

        rows = class_usage(start=START, end=END, granularity="month", group_by=["reason", "model"])
        reasons = {row["reason"] for row in rows if row["tokens"]}
        assert {
            "cache.prefix_cache", "effective.input", "effective.output", "effective.structural", "waste.aborted",
            "waste.timeout", "waste.truncated", "waste.duplicate", "waste.padding", "shadow.spec_rejected",
            "effective.cache_write",
        } <= reasons  # fmt: skip
        assert not [row for row in rows if row["unpriced_tokens"]], "every model has a price or a pool"
        # The copywriter's brand guide written to the hosted model's prompt cache, at its cache-write price.
        [written] = [row for row in rows if row["reason"] == "effective.cache_write"]
        assert written["model"] == "claude-haiku" and written["tokens"] % 1200 == 0
        assert written["cost"]["CNY"] == (Decimal(written["tokens"]) * 9 / 1_000_000).quantize(Decimal("0.000001"))
        idle = PoolIdleHour.objects.filter(hour__gte=START, hour__lt=END)
        assert idle.count() == 31 * 24 and all(h.idle > 0 for h in idle[:5])
        assert JournalEntry.objects.filter(day__gte=START.date(), day__lt=END.date()).exists()
        assert ElasticWindow.objects.filter(business_line="marketing").count() == 1

        second = run(3000)
        assert f"loaded {total:,} records: 0 stored, {total:,} already there, 0 refused" in second, second
        assert ElasticWindow.objects.filter(business_line="marketing").count() == 1


@pytest.mark.django_db
def test_demo_datas_healthy_lines_are_healthy_and_its_bad_ones_are_not() -> None:
    with time_machine.travel(datetime(2026, 11, 3, 12, tzinfo=UTC), tick=True):
        run(3000)

    # October as the health alert judges a window: each line's ratios against its thresholds row.
    judged = {
        subject.key: health(data, {"min_tokens": 0})
        for subject, data in health_series(params={"window_hours": 31 * 24}, business_line="", now=END - HOUR)
    }
    breaches = {line: result.figures["breaches"] for line, result in judged.items() if result.firing}
    # legal asks its question before the contract (the prefix cache serves only the system
    # prompt); payments had a retry storm. The forgotten job is healthy by its ratios: the
    # audit's zombie finding shows it (tests/dashboards/test_audit_flags.py).
    assert set(breaches) == {"legal", "payments"} and breaches["legal"] == ["cache_hit"], judged
    assert "waste" in breaches["payments"] and "cache_hit" not in breaches["payments"]
    assert judged["payments"].figures["reasons"][0]["top"] == [{"reason": "timeout", "share": 1.0}]
    assert set(judged) == {"customer-service", "search", "marketing", "data-platform", "payments", "legal"}


@pytest.mark.django_db
def test_demo_data_fills_the_month_of_the_accounting_zone(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"  # as make demo-data sets it
    start, end = datetime(2026, 9, 30, 16, tzinfo=UTC), datetime(2026, 10, 31, 16, tzinfo=UTC)
    with time_machine.travel(datetime(2026, 11, 3, 12, tzinfo=UTC), tick=True):
        run(3000)

    first, last = Record.objects.aggregate(first=Min("ts"), last=Max("ts")).values()
    assert start <= first < start + timedelta(hours=1) and end - timedelta(hours=1) <= last < end
    days = set(JournalEntry.objects.values_list("day", flat=True))
    assert min(days) == date(2026, 10, 1) and max(days) == date(2026, 10, 31)


def build(records: int) -> str:
    out = io.StringIO()
    call_command("demo_data", "--records", str(records), stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_demo_data_builds_the_previous_month_closed_and_the_current_one_in_progress(settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"  # as make demo-data sets it
    oct_, nov = date(2026, 10, 1), date(2026, 11, 1)
    at_noon = datetime(2026, 11, 3, 12, tzinfo=UTC)
    with time_machine.travel(at_noon + timedelta(minutes=5), tick=True):
        first = build(3000)

        assert "2026-10: closed" in first and "2026-11: open (in progress)" in first, first
        assert Period.objects.get(month=oct_).status == "closed"
        assert not Period.objects.filter(month=nov, status="closed").exists()
        request = CloseRequest.objects.get(month=oct_)
        assert (request.state, request.prepared_by.username, request.decided_by.username) == (
            "approved", "demo-preparer", "demo-approver",
        )  # fmt: skip
        assert {"key", "label", "value", "ok", "detail", "details"} == set(request.checklist[0])
        assert [i["key"] for i in request.checklist] == [i.key for i in close_checklist(month=oct_)]
        # As a set: the period's close event is stamped by the database clock, not the travelled one.
        history = {(e.action, e.who) for e in close_history(month=oct_)}
        assert history == {("submitted", "demo-preparer"), ("approved", "demo-approver"), ("closed", "demo-approver")}
        audited = AuditEntry.objects.filter(model="ledger.CloseRequest", object_id=str(request.pk)).order_by("id")
        assert [(e.action, e.source, e.after["state"]) for e in audited] == [
            ("create", "system", "submitted"), ("update", "system", "approved"),
        ]  # fmt: skip
        checks = {i["key"]: (i["value"], i["ok"]) for i in request.checklist}
        assert checks["unpriced_models"] == checks["days_not_accrued"] == checks["dirty_days"] == (0, True)
        assert all(u.groups.filter(name="finance").exists() for u in (request.prepared_by, request.decided_by))
        lines = {"customer-service", "search", "marketing", "data-platform", "payments", "legal"}
        for month in (oct_, nov):
            assert set(Budget.objects.filter(month=month).values_list("business_line", flat=True)) == lines
            assert Revenue.objects.filter(month=month, business_line="marketing").exists()
        assert Finding.objects.filter(period=oct_, kind="elastic_over_revenue", business_line="marketing").exists()
        # The supplier's bill reconciles but for the one difference planted in it.
        (bill,) = month_reconcile(month=oct_)
        assert bill.bill is not None and bill.bill.rows >= 28 and len(bill.differences) == 1
        (planted,) = bill.open
        assert planted.day.day == PLANTED_DAY and abs(planted.amount_diff - PLANTED_AMOUNT) < Decimal("0.01")
        (book,) = trial_balance(month=oct_)["currencies"]
        assert book["balanced"] and book["debits"] > 0
        assert JournalEntry.objects.filter(period_id=nov, kind="accrual").exists()
        assert Record.objects.filter(ts__gte=datetime(2026, 10, 31, 16, tzinfo=UTC)).exists()
        assert set(CostCentre.objects.values_list("business_line", flat=True)) == lines
        assert CostCentre.objects.get(business_line="customer-service").code == "CC-1001"
        finance = Client()
        finance.force_login(request.decided_by)
        pack = load_workbook(io.BytesIO(finance.get("/finance/pack/2026-10.xlsx").content))
        total = next(r for r in pack["Trial balance"].iter_rows(values_only=True) if r[2] == "Total")
        assert (total[3], total[4], total[6]) == (float(book["debits"]), float(book["credits"]), "yes")
        # Each finding resolved or accepted by demo-preparer before the close, with a reason:
        # under the findings line of the approved checklist, and in the pack's findings sheet.
        reviews = next(i["reviews"] for i in request.checklist if i["key"] == "open_findings")
        assert (
            {(r["kind"], r["business_line"]) for r in reviews}
            == {(f.kind, f.business_line) for f in Finding.objects.filter(period=oct_)}
            != set()
        )
        assert all(r["by"] == "demo-preparer" and r["note"] for r in reviews)
        assert len(list(pack["Checklist as approved"].iter_rows())) == 2 + len(request.checklist) + len(reviews)
        decided = [r[-3] for r in pack["Month-end findings"].iter_rows(min_row=3, values_only=True)]
        assert decided == ["demo-preparer"] * len(reviews)
        assert finance.get("/finance/pack/2026-11.xlsx").status_code == 409
        delivered = delivered_alerts_and_audit(first, finance)
        stored = Record.objects.count()
        oct_journal = list(JournalLine.objects.filter(period_id=oct_).values_list("id", "debit", "credit"))

        second = build(3000)

        assert "2026-10: closed before: left as it is" in second, second
        assert re.search(r"loaded ([\d,]+) records: 0 stored", second), second
        assert Record.objects.count() == stored and CloseRequest.objects.count() == 1
        assert list(JournalLine.objects.filter(period_id=oct_).values_list("id", "debit", "credit")) == oct_journal
        assert not JournalEntry.objects.filter(kind="adjustment").exists()
        assert "alerts: kept as they were" in second and Notification.objects.count() == delivered

    with time_machine.travel(datetime(2026, 11, 3, 18, 5, tzinfo=UTC), tick=True):
        later = build(3000)  # six hours on: those hours' records come, the earlier ones are the same

    got = re.search(r"loaded ([\d,]+) records: ([\d,]+) stored, ([\d,]+) already there", later)
    assert got, later
    added, again = (int(g.replace(",", "")) for g in got.groups()[1:])
    before_noon = Record.objects.filter(ts__gte=datetime(2026, 10, 31, 16, tzinfo=UTC), ts__lt=at_noon).exclude(
        source__name=LEGACY_KEY  # its one record is not the demo's generated traffic
    )
    assert added > 0 and again == before_noon.count() and Record.objects.count() == stored + added
    assert not Record.objects.filter(ts__gte=datetime(2026, 11, 3, 18, tzinfo=UTC)).exists()


def delivered_alerts_and_audit(printed: str, finance: Client) -> int:
    """The closed month's audit report, alerts of now delivered to one demo channel of each chat
    kind (then disabled: their receiver is gone), one alert acknowledged; the deliveries' count."""
    report = AuditReport.objects.get(month=date(2026, 10, 1))
    assert report.findings.exists() and "audit 2026-10:" in printed, printed
    sent = Notification.objects.filter(status="sent")
    kinds = {kind for _, kind, _, _ in CHANNELS}
    assert set(sent.values_list("channel__kind", flat=True)) == {*kinds, "email"}, printed
    assert sent.filter(alert__kind="audit").exists() and sent.exclude(alert__kind="audit").exists()
    assert not Notification.objects.exclude(status="sent").exists()
    assert all(c.disabled_reason == RECEIVER_GONE for c in Channel.objects.filter(kind__in=kinds))
    # One channel stays enabled, the local mailbox (the test's mail backend here), with what it delivered.
    local = Channel.objects.get(name=LOCAL_CHANNEL[0])
    assert local.disabled_at is None and sent.filter(channel=local).count() == len(mail.outbox) > 0, printed
    assert all(m.to == [LOCAL_CHANNEL[1]] for m in mail.outbox)
    assert AlertAction.objects.filter(action="ack", user__username="demo-oncall").count() == 1
    assert finance.get("/audits/2026-10/").status_code == 200
    legacy = CollectorKey.objects.get(name=LEGACY_KEY)
    refused = Rejection.objects.filter(source=legacy)
    assert (
        legacy.last_seen_at is not None and refused.count() == 3 and Record.objects.filter(source=legacy).count() == 1
    )
    assert any("prompt_cached" in json.dumps(r.errors) for r in refused)
    # The demo's own key wrote in process, without the API's key check: seen all the same.
    assert CollectorKey.objects.get(name="demo-data").last_seen_at is not None
    return Notification.objects.count()
