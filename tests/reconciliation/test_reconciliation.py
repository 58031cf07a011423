"""Bill reconciliation, end to end: records through the collector API, classification, pricing
(a price book for the hosted models, a cost pool for the self-hosted one) and accrual; a bill
generated from the records sent (not from the platform's tables) with one planted difference of
each kind; each found with its figures and nothing else; the adjustment, approved by a second
finance user, makes the month reconcile. Plus: refused rows kept with their reasons, idempotent
re-import, a bill after the close adjusted in the first open month, scoped users, the month-end
finding, the page in two languages and its downloads."""

from __future__ import annotations

import csv
import io
from collections import Counter
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone
from openpyxl import load_workbook

from apps.accounts.models import UserScope
from apps.alerts.evaluation import rule_evaluate
from apps.auditlog.models import AuditEntry
from apps.ledger.models import Finding, JournalEntry, JournalLine
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.checks import month_findings
from apps.ledger.services.periods import month_totals, period_close
from apps.pricing.services import hours_price, price_set
from apps.reconciliation.adjustments import (
    AdjustmentError,
    adjustment_approve,
    adjustment_propose,
    adjustment_reject,
)
from apps.reconciliation.imports import bill_import
from apps.reconciliation.matching import supplier_reconcile
from apps.reconciliation.models import Bill, BillAdjustment, Supplier
from tests import factories
from tests.alerts.test_messages import text_of
from tests.conftest import Collector
from tests.ledger.helpers import NOV, OCT, balanced

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]

# Per record (factories.record's tokens): prompt 1200 (512 cached), completion 180. At 2000 /
# 500 / 8000 per million: 688 x 0.002 + 512 x 0.0005 + 180 x 0.008 = 3.072.
PER_RECORD = Decimal("3.072")
PROMPT, COMPLETION = 1200, 180
LINES = {"alpha": "support", "beta": "search"}
# (day of October, model, project) -> records: what the platform gets.
SENT = {
    (3, "gpt-4o", "alpha"): 2,
    (3, "gpt-4o", "beta"): 2,
    (4, "gpt-4o", "alpha"): 1,
    (4, "gpt-4o-mini", "alpha"): 2,
    (5, "gpt-4o-mini", "beta"): 1,  # left off the bill: only in the platform
    (6, "gpt-4o", "beta"): 1,  # billed 5.00 more: amount mismatch
    (7, "gpt-4o-mini", "alpha"): 1,  # billed 5,000 more input tokens: token mismatch
}
QWEN_DAYS = (1, 2)  # self-hosted qwen on the pool


def _ts(day: int, hour: int) -> str:
    return datetime(2026, 10, day, hour, 5, tzinfo=UTC).isoformat()


def _send(collector: Collector, records: list[dict[str, Any]]) -> None:
    response = collector.send(records, on_time=True)
    assert response.status_code == 200 and response.json()["accepted"] == len(records), response.content


@pytest.fixture
def platform(collector: Collector) -> Any:
    return platform_build(collector)


def platform_build(collector: Collector) -> Any:
    """October's records priced and booked; returns the cost pool."""
    records = [
        factories.record(
            ts=_ts(day, 1 + i % 3),
            model=model,
            dims={"business_line": LINES[project], "project": project},
            prompt_hash=None,
        )
        for (day, model, project), n in SENT.items()
        for i in range(n)
    ]
    records += [
        factories.record(ts=_ts(day, 2), dims={"business_line": "support", "project": "alpha"}, prompt_hash=None)
        for day in QWEN_DAYS
    ]
    _send(collector, records)
    prices = {"input": Decimal("2000"), "cached_input": Decimal("500"), "output": Decimal("8000")}
    price_set(model_pattern="gpt-4o*", prices=prices, effective_from=datetime(2026, 9, 1, tzinfo=UTC))
    pool = factories.cost_pool(
        name="h100-pool",
        effective_from=datetime(2026, 10, 1, tzinfo=UTC),
        effective_to=datetime(2026, 10, 3, tzinfo=UTC),
    )  # 2 GPUs x 10.00 = 20.00 an hour: 480.00 a day on Oct 1 and 2
    hours_price(start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 11, 1, tzinfo=UTC))
    month_accrue(month=OCT)
    return pool


def hosted() -> Supplier:
    """A hosted provider's export: one row per day x model x project, tokens and cost."""
    return Supplier.objects.create(
        name="openai",
        kind=Supplier.Kind.HOSTED,
        currency="CNY",
        model_patterns=["gpt-4o*"],
        key_dim="project",
        col_day="Date",
        col_model="Model",
        col_key="Project",
        col_input_tokens="Input tokens",
        col_output_tokens="Output tokens",
        col_amount="Cost",
        col_currency="Currency",
    )


def gpu(pool: Any) -> Supplier:
    """A GPU cloud's export: semicolons, day.month.year, decimal commas, no tokens."""
    return Supplier.objects.create(
        name="gpu-cloud",
        kind=Supplier.Kind.POOL,
        currency="CNY",
        pool=pool,
        col_day="usage_date",
        col_model="instance",
        col_amount="Kosten",
        date_format="%d.%m.%Y",
        decimal_separator=",",
        delimiter=";",
    )


def hosted_bill(*, plant: bool = True) -> bytes:
    """The bill the provider would send for what was sent, with the planted differences."""
    rows = []
    for (day, model, project), n in sorted(SENT.items()):
        if plant and (day, model, project) == (5, "gpt-4o-mini", "beta"):
            continue
        amount = (PER_RECORD * n).quantize(Decimal("0.01"))
        prompt = PROMPT * n
        if plant and day == 6:
            amount += Decimal("5.00")
        if plant and day == 7:
            prompt += 5000
        rows.append([f"2026-10-{day:02d}", model, project, prompt, COMPLETION * n, f"{amount}", "CNY"])
    if plant:
        rows.append(["2026-10-08", "gpt-4o", "alpha", 1000, 200, "7.50", "CNY"])  # only on the bill
    return _csv(["Date", "Model", "Project", "Input tokens", "Output tokens", "Cost", "Currency"], rows)


def _csv(header: list[str], rows: list[list[Any]], delimiter: str = ",") -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def figures(supplier: Supplier) -> set[tuple[Any, ...]]:
    return {
        (d.kind, d.day, d.model, d.key, d.bill_amount, d.platform_amount, d.bill_tokens, d.platform_tokens)
        for d in supplier_reconcile(supplier=supplier, month=OCT).differences
    }


def users() -> tuple[Any, Any]:
    return factories.finance_user("preparer"), factories.finance_user("approver")


def d(day: int) -> date:
    return date(2026, 10, day)


# --- matching -----------------------------------------------------------------------------------


def test_it_finds_each_planted_difference_with_its_figures_and_nothing_else(platform: Any) -> None:
    supplier = hosted()
    result = bill_import(supplier=supplier, month=OCT, content=hosted_bill(), filename="openai-2026-10.csv")
    assert result.accepted and result.bill.rows == 7

    mini, one = 1 * (PROMPT + COMPLETION), PER_RECORD.quantize(Decimal("0.01"))
    assert figures(supplier) == {
        ("platform_only", d(5), "gpt-4o-mini", "beta", Decimal(0), one, 0, mini),
        ("amount", d(6), "gpt-4o", "beta", one + 5, one, mini, mini),
        ("tokens", d(7), "gpt-4o-mini", "alpha", one, one, mini + 5000, mini),
        ("bill_only", d(8), "gpt-4o", "alpha", Decimal("7.50"), Decimal(0), 1200, 0),
    }
    found = supplier_reconcile(supplier=supplier, month=OCT)
    assert {x.kind: x.business_line for x in found.differences} == {
        "platform_only": "search",
        "amount": "search",
        "tokens": "support",
        "bill_only": "unassigned",  # nothing on the platform says whose it is
    }
    assert found.unreconciled == Decimal("3.07") + 5 + Decimal("7.50") and not found.reconciled


def test_an_unplanted_bill_matches_exactly(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill(plant=False))

    found = supplier_reconcile(supplier=supplier, month=OCT)
    assert found.differences == [] and found.reconciled
    assert (
        found.bill_total
        == found.platform_total
        == sum(((PER_RECORD * n).quantize(Decimal("0.01")) for n in SENT.values()), Decimal(0))
    )


def test_tolerances_absorb_small_differences(platform: Any) -> None:
    supplier = hosted()
    supplier.amount_rel, supplier.tokens_rel = Decimal("0.9"), Decimal("0.9")  # 5.00 on 8.07: 62 %
    supplier.save()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())

    assert {x[0] for x in figures(supplier)} == {"platform_only", "bill_only"}


def test_it_matches_by_accounting_days_in_shanghai(collector: Collector, settings: Any) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    dims = {"business_line": "support", "project": "alpha"}
    # 17:05 UTC on the 3rd is 01:05 on the 4th in Shanghai.
    _send(collector, [factories.record(ts=_ts(3, 17), model="gpt-4o", dims=dims, prompt_hash=None)])
    prices = {"input": Decimal("2000"), "cached_input": Decimal("500"), "output": Decimal("8000")}
    price_set(model_pattern="gpt-4o*", prices=prices, effective_from=datetime(2026, 9, 1, tzinfo=UTC))
    hours_price(start=datetime(2026, 9, 30, tzinfo=UTC), end=datetime(2026, 11, 1, tzinfo=UTC))
    supplier = hosted()
    row = ["gpt-4o", "alpha", PROMPT, COMPLETION, "3.07", "CNY"]
    header = ["Date", "Model", "Project", "Input tokens", "Output tokens", "Cost", "Currency"]

    bill_import(supplier=supplier, month=OCT, content=_csv(header, [["2026-10-04", *row]]))
    assert supplier_reconcile(supplier=supplier, month=OCT).differences == []

    bill_import(supplier=supplier, month=OCT, content=_csv(header, [["2026-10-03", *row]]))
    assert {(x[0], x[1]) for x in figures(supplier)} == {("bill_only", d(3)), ("platform_only", d(4))}


def test_a_gpu_pool_bill_matches_the_pool_cost(platform: Any) -> None:
    supplier = gpu(platform)
    rows = [["01.10.2026", "8x H100", "480,00"], ["02.10.2026", "8x H100", "1.500,00"], ["03.10.2026", "", "12,5"]]
    bill_import(supplier=supplier, month=OCT, content=_csv(["usage_date", "instance", "Kosten"], rows, ";"))

    assert figures(supplier) == {
        ("amount", d(2), "h100-pool", "", Decimal("1500.00"), Decimal("480.00"), None, None),
        ("bill_only", d(3), "h100-pool", "", Decimal("12.5"), Decimal(0), None, None),
    }


# --- adjustments ----------------------------------------------------------------------------------


def test_the_approved_adjustment_makes_the_month_reconcile(platform: Any) -> None:
    supplier, (preparer, approver) = hosted(), users()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    proposal = adjustment_propose(supplier=supplier, month=OCT, user=preparer, note="October's bill")
    assert proposal.amount == Decimal("9.43")  # -3.07 + 5.00 + 0 + 7.50
    with pytest.raises(PermissionDenied):
        adjustment_approve(adjustment_id=proposal.pk, user=preparer)

    posted = adjustment_approve(adjustment_id=proposal.pk, user=approver)

    entry = posted.entry
    assert entry is not None and (entry.kind, entry.period_id, entry.adjusts) == ("bill", OCT, None)
    lines = JournalLine.objects.filter(entry=entry, account__role="bill_diff")
    assert sum(ln.debit - ln.credit for ln in lines) == Decimal("9.43")
    assert sum(ln.tokens for ln in lines) == -1380 + 5000 + 1200
    assert balanced()
    found = supplier_reconcile(supplier=supplier, month=OCT)
    assert found.reconciled and found.unreconciled == 0
    assert len(found.differences) == 4 and all(x.explained for x in found.differences)
    # The accrual books priced rows again and leaves the bill's entry alone.
    month_accrue(month=OCT, force=True)
    assert JournalEntry.objects.filter(pk=entry.pk).exists()
    assert supplier_reconcile(supplier=supplier, month=OCT).reconciled
    assert AuditEntry.objects.filter(model="reconciliation.BillAdjustment", object_id=str(proposal.pk)).count() == 2


def test_one_difference_can_be_adjusted_alone(platform: Any) -> None:
    supplier, (preparer, approver) = hosted(), users()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    proposal = adjustment_propose(supplier=supplier, month=OCT, user=preparer, day=d(6), model="gpt-4o", key="beta")
    adjustment_approve(adjustment_id=proposal.pk, user=approver)

    found = supplier_reconcile(supplier=supplier, month=OCT)
    assert [x.kind for x in found.differences if x.explained] == ["amount"]
    assert found.unreconciled == Decimal("3.07") + Decimal("7.50")


def test_an_adjustment_of_a_month_closed_meanwhile_goes_to_the_first_open_month(platform: Any) -> None:
    supplier, (preparer, approver) = hosted(), users()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    proposal = adjustment_propose(supplier=supplier, month=OCT, user=preparer)
    period_close(month=OCT)

    entry = adjustment_approve(adjustment_id=proposal.pk, user=approver).entry

    assert entry is not None and (entry.period_id, entry.adjusts) == (NOV, OCT)
    assert supplier_reconcile(supplier=supplier, month=OCT).reconciled
    # The month's booked usage still equals its priced total: a bill's difference is not usage.
    assert all(total.booked == total.priced for total in month_totals(month=OCT))


def test_a_rejected_proposal_posts_nothing_and_one_proposal_waits_at_a_time(platform: Any) -> None:
    supplier, (preparer, approver) = hosted(), users()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    proposal = adjustment_propose(supplier=supplier, month=OCT, user=preparer)
    with pytest.raises(AdjustmentError, match="already has an adjustment waiting"):
        adjustment_propose(supplier=supplier, month=OCT, user=approver)
    with pytest.raises(AdjustmentError, match="say why"):
        adjustment_reject(adjustment_id=proposal.pk, user=approver, note=" ")
    with pytest.raises(PermissionDenied):
        adjustment_reject(adjustment_id=proposal.pk, user=preparer, note="mine")

    adjustment_reject(adjustment_id=proposal.pk, user=approver, note="the 5.00 is a known credit")

    assert not JournalEntry.objects.filter(kind="bill").exists()
    with pytest.raises(AdjustmentError, match="not waiting for approval"):
        adjustment_approve(adjustment_id=proposal.pk, user=approver)
    assert adjustment_propose(supplier=supplier, month=OCT, user=approver).state == "proposed"


def test_a_scoped_finance_user_cannot_propose(platform: Any) -> None:
    supplier, scoped = hosted(), factories.finance_user("scoped")
    UserScope.objects.create(user=scoped, business_lines=["search"])
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    with pytest.raises(PermissionDenied):
        adjustment_propose(supplier=supplier, month=OCT, user=scoped)


def test_nothing_to_adjust_is_said(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill(plant=False))
    with pytest.raises(AdjustmentError, match="no open difference"):
        adjustment_propose(supplier=supplier, month=OCT, user=users()[0])


# --- imports ------------------------------------------------------------------------------------


def test_it_refuses_a_bill_with_bad_rows_and_keeps_each_reason(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill(plant=False))
    header = ["Date", "Model", "Project", "Input tokens", "Output tokens", "Cost", "Currency"]
    rows = [
        ["2026-10-03", "gpt-4o", "alpha", 100, 10, "1.00", "CNY"],
        ["03/10/2026", "gpt-4o", "alpha", 100, 10, "1.00", "CNY"],
        ["2026-11-01", "gpt-4o", "alpha", 100, 10, "1.00", "CNY"],
        ["2026-10-03", "", "alpha", 100, 10, "1.00", "CNY"],
        ["2026-10-03", "gpt-4o", "alpha", "12.5", 10, "1.00", "CNY"],
        ["2026-10-03", "gpt-4o", "alpha", 100, 10, "one", "CNY"],
        ["2026-10-03", "gpt-4o", "alpha", 100, 10, "1.00", "USD"],
    ]

    result = bill_import(supplier=supplier, month=OCT, content=_csv(header, rows), filename="bad.csv")

    assert not result.accepted and result.bill.state == "refused" and result.bill.rows == 7
    reasons = {e.row: e.reason for e in result.bill.errors.all()}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 8]
    assert "'03/10/2026' is not a day in the format %Y-%m-%d" in reasons[3]
    assert "outside the bill's month 2026-10" in reasons[4]
    assert "Model is empty" in reasons[5]
    assert "'12.5' is not a whole number of tokens" in reasons[6]
    assert "'one' is not an amount" in reasons[7]
    assert "'USD' is not the supplier's currency CNY" in reasons[8]
    assert result.bill.errors.get(row=3).raw.startswith("03/10/2026,gpt-4o")
    # The month's accepted bill is the earlier one, untouched.
    assert supplier_reconcile(supplier=supplier, month=OCT).reconciled


def test_a_bill_of_many_bad_rows_keeps_the_first_thousand_and_counts_the_rest(db: Any) -> None:
    """Issue 31, finding 8: a 19 MB file kept 3,000,000 error rows and the page timed out."""
    from apps.reconciliation.imports import MAX_ERROR_ROWS

    header = ["Date", "Model", "Project", "Input tokens", "Output tokens", "Cost", "Currency"]
    rows = [["not-a-day", "gpt-4o", "alpha", 1, 1, "1.00", "CNY"]] * (MAX_ERROR_ROWS + 4000)

    result = bill_import(supplier=hosted(), month=OCT, content=_csv(header, rows), filename="huge.csv")

    assert result.bill.errors.count() == MAX_ERROR_ROWS + 1
    assert result.refused_rows == MAX_ERROR_ROWS + 4000 and not result.accepted
    rest = result.bill.errors.order_by("-row").first()
    assert rest is not None and rest.row == MAX_ERROR_ROWS + 2 and "4,000 more bad rows" in rest.reason


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (["2026-10-03", "gpt-4o", "alpha", 1, 1, "1E+999999", "CNY"], "is not an amount the books can hold"),
        (["2026-10-03", "gpt-4o", "alpha", 10**20, 1, "1.00", "CNY"], "is more tokens than the books can hold"),
        (["2026-10-03", "gpt\x00-4o", "alpha", 1, 1, "1.00", "CNY"], "holds a NUL character"),
        (["2026-10-03", "gpt-4o", "a" * 300, 1, 1, "1.00", "CNY"], "is longer than 256 characters"),
        (["2026-10-03", "g" * 201, "alpha", 1, 1, "1.00", "CNY"], "is longer than 200 characters"),
        (["not\x00a-day", "gpt-4o", "alpha", 1, 1, "1.00", "CNY"], "is not a day"),
    ],
)
def test_a_bill_value_the_books_cannot_hold_is_a_refused_row_not_a_500(db: Any, row: list[Any], reason: str) -> None:
    """Issue 31, a Low: 1E+999999, NUL bytes and over-long fields in a bill were 500s."""
    header = ["Date", "Model", "Project", "Input tokens", "Output tokens", "Cost", "Currency"]

    result = bill_import(supplier=hosted(), month=OCT, content=_csv(header, [row]), filename="bad\x00.csv")

    (error,) = result.bill.errors.all()
    assert not result.accepted and reason in error.reason and "\x00" not in error.raw + error.reason


def test_it_names_the_mapped_columns_a_file_lacks(platform: Any) -> None:
    result = bill_import(supplier=hosted(), month=OCT, content=_csv(["day", "model", "cost"], [["x", "y", "1"]]))
    assert not result.accepted
    assert result.bill.errors.get().reason == (
        "columns Date, Model, Input tokens, Output tokens, Cost, Currency, Project (from the supplier's mapping) "
        "are not in the header: day, model, cost"
    )


def test_reimporting_the_month_replaces_its_bill(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    before = figures(supplier)

    again = bill_import(supplier=supplier, month=OCT, content=hosted_bill())

    assert again.replaced is not None and figures(supplier) == before
    assert Counter(Bill.objects.values_list("state", flat=True)) == {"accepted": 1, "replaced": 1}
    assert again.bill.lines.count() == 7 and again.replaced.lines.count() == 0


def _closed_books(month: date) -> list[tuple[Any, ...]]:
    return list(JournalLine.objects.filter(period_id=month).order_by("id").values_list("id", "debit", "credit"))


def test_a_bill_after_the_close_is_accepted_and_adjusted_in_the_first_open_month_with_links_both_ways(
    platform: Any,
) -> None:
    supplier, (preparer, approver) = hosted(), users()
    period_close(month=OCT)
    before = _closed_books(OCT)
    upload = io.BytesIO(hosted_bill())
    upload.name = "openai-late.csv"

    answer = _client(preparer).post(
        "/finance/reconciliation/act/",
        {"action": "import", "month": "2026-10", "supplier": supplier.pk, "file": upload},
        follow=True,
    )

    assert "7 rows imported" in answer.content.decode() and "posted in 2026-11" in answer.content.decode()
    assert Bill.objects.get().state == "accepted"
    proposal = BillAdjustment.objects.get(state="proposed")
    assert proposal.proposed_by == preparer and proposal.amount == Decimal("9.43")  # 7.50 + 5.00 - 3.07
    _client(approver).post(
        "/finance/reconciliation/act/", {"action": "approve", "month": "2026-10", "adjustment": proposal.pk}
    )
    proposal.refresh_from_db()
    entry = proposal.entry
    assert entry is not None and (entry.period_id, entry.adjusts, entry.kind) == (NOV, OCT, "bill")
    assert _closed_books(OCT) == before and balanced()
    assert supplier_reconcile(supplier=supplier, month=OCT).reconciled
    # From the bill's adjustment to its entry, and from the entry's lines back to the adjustment.
    journal = f"/finance/journal/?month=2026-11&amp;entry={entry.pk}"
    assert journal in _client(approver).get(PAGE).content.decode()
    lines = _client(approver).get(journal.replace("&amp;", "&")).content.decode()
    back = f"/finance/reconciliation/?month=2026-10#adjustment-{proposal.pk}"
    assert lines.count(back) == JournalLine.objects.filter(entry=entry).count() > 0
    assert f'id="adjustment-{proposal.pk}"' in _client(approver).get(PAGE).content.decode()


def test_a_bill_after_the_close_that_matches_proposes_nothing(platform: Any) -> None:
    supplier = hosted()
    period_close(month=OCT)

    result = bill_import(supplier=supplier, month=OCT, content=hosted_bill(plant=False))

    assert result.accepted and not BillAdjustment.objects.exists()
    assert supplier_reconcile(supplier=supplier, month=OCT).reconciled


def test_the_command_imports_and_reports(platform: Any, tmp_path: Any) -> None:
    hosted()
    path = tmp_path / "bill.csv"
    path.write_bytes(hosted_bill())
    out = io.StringIO()
    call_command("import_bill", "openai", "2026-10", str(path), stdout=out)
    assert "imported 7 rows" in out.getvalue() and "4 open differences" in out.getvalue()
    assert "2026-10-06 gpt-4o beta amount: bill 8.07 platform 3.07 difference 5.00" in out.getvalue()

    path.write_bytes(b"Date,Model\n")
    with pytest.raises(CommandError, match="refused: 1 bad rows"):
        call_command("import_bill", "openai", "2026-10", str(path), stdout=out, stderr=io.StringIO())
    with pytest.raises(CommandError, match="no supplier 'nobody'"):
        call_command("import_bill", "nobody", "2026-10", str(path))


# --- the finding --------------------------------------------------------------------------------


def test_it_raises_a_finding_when_the_unreconciled_amount_passes_the_threshold(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    assert [f for f in month_findings(month=OCT) if f.kind == "bill_unreconciled"] == []  # 15.57 < 100.00

    supplier.finding_threshold = Decimal("15.00")
    supplier.save()
    found = [f for f in month_findings(month=OCT) if f.kind == "bill_unreconciled"]

    assert len(found) == 1 and found[0].action == "reconcile_bill"
    assert found[0].figures == {
        "named": "openai 15.57/15.00 CNY",
        "suppliers": [
            {"supplier": "openai", "currency": "CNY", "unreconciled": "15.57", "threshold": "15.00", "differences": 4}
        ],
    }
    period_close(month=OCT)
    assert Finding.objects.filter(kind="bill_unreconciled", period=OCT).exists()
    # Delivered to chat in the channel's language.
    fired = rule_evaluate(rule_id=factories.alert_rule("ledger_finding").id, now=timezone.now())
    [alert] = [a for a in fired if a.figures["_finding"]["kind"] == "bill_unreconciled"]
    chinese = text_of(alert, "zh-hans")
    assert "供应商账单未对平" in chinese and "openai 15.57/15.00 CNY" in chinese
    assert "Supplier bills of 2026-10 leave unexplained differences" in text_of(alert, "en")


# --- the page -----------------------------------------------------------------------------------

PAGE = "/finance/reconciliation/?month=2026-10"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_uploads_a_bill_and_shows_the_differences_in_both_languages(platform: Any) -> None:
    supplier = hosted()
    client = _client(factories.finance_user("fin"))
    upload = io.BytesIO(hosted_bill())
    upload.name = "openai.csv"
    form = {"action": "import", "month": "2026-10", "supplier": supplier.pk, "file": upload}
    answer = client.post("/finance/reconciliation/act/", form)
    assert answer.status_code == 302

    english = client.get(PAGE).content.decode()
    assert "7 rows imported" in english and "only in the platform" in english and "token mismatch" in english
    assert "8.07" in english and "6,380" in english  # the mismatches' figures, formatted
    chinese = client.get(PAGE, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "账单对账" in chinese and "仅在平台" in chinese and "词元不符" in chinese


def test_the_page_shows_refused_rows(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=_csv(["Date"], [["x"]]))
    page = _client(factories.finance_user("fin")).get(PAGE).content.decode()
    assert 'id="errors"' in page and "are not in the header" in page


def test_a_scoped_user_sees_only_their_lines(platform: Any) -> None:
    bill_import(supplier=hosted(), month=OCT, content=hosted_bill())
    user = factories.finance_user("scoped")
    UserScope.objects.create(user=user, business_lines=["support"])
    client = _client(user)

    rows = _rows(client.get(f"{PAGE}&download=differences&format=csv"))

    assert [(r["Day"], r["Model"], r["Key or project"]) for r in rows] == [("2026-10-07", "gpt-4o-mini", "alpha")]
    page = client.get(PAGE).content.decode()
    assert "beta" not in page and 'id="upload"' not in page
    assert client.post("/finance/reconciliation/act/", {"action": "propose", "month": "2026-10"}).status_code == 403


def test_it_downloads_the_differences_as_csv_and_xlsx(platform: Any) -> None:
    bill_import(supplier=hosted(), month=OCT, content=hosted_bill())
    client = _client(factories.finance_user("fin"))

    answer = client.get(f"{PAGE}&download=differences&format=csv")
    assert answer.content.startswith("\ufeff".encode())
    rows = _rows(answer)
    amount = next(r for r in rows if r["Difference"] == "amount mismatch")
    assert (amount["Bill"], amount["Platform"], amount["Bill minus platform"]) == ("8.07", "3.07", "5.00")

    book = load_workbook(io.BytesIO(client.get(f"{PAGE}&download=differences&format=xlsx").content))
    sheet = book.active
    assert sheet is not None and sheet.max_row == 2 + len(rows)
    assert client.get(f"{PAGE}&download=nothing").status_code == 404


def test_other_roles_are_kept_out(platform: Any) -> None:
    client = _client(factories.finance_user("eng", role="engineer"))
    assert client.get(PAGE).status_code == 403


def _rows(answer: Any) -> list[dict[str, str]]:
    assert answer.status_code == 200
    return list(csv.DictReader(io.StringIO(answer.content.decode("utf-8-sig"))))


def test_the_page_proposes_an_entry_for_one_difference(platform: Any) -> None:
    supplier = hosted()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    client = _client(factories.finance_user("fin"))
    form = {"action": "propose", "month": "2026-10", "supplier": supplier.pk}
    client.post("/finance/reconciliation/act/", form | {"day": "2026-10-08", "model": "gpt-4o", "key": "alpha"})

    proposal = BillAdjustment.objects.get()
    assert (proposal.amount, [line["day"] for line in proposal.lines]) == (Decimal("7.50"), ["2026-10-08"])
    answer = client.post("/finance/reconciliation/act/", form, follow=True)
    assert "already has an adjustment waiting for approval" in answer.content.decode()


def test_approving_on_the_page_posts_the_entry(platform: Any) -> None:
    supplier, (preparer, approver) = hosted(), users()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    _client(preparer).post(
        "/finance/reconciliation/act/", {"action": "propose", "month": "2026-10", "supplier": supplier.pk}
    )
    proposal = BillAdjustment.objects.get()
    mine = _client(preparer).get(PAGE).content.decode()
    assert "A different finance user approves it." in mine

    _client(approver).post(
        "/finance/reconciliation/act/", {"action": "approve", "month": "2026-10", "adjustment": proposal.pk}
    )

    proposal.refresh_from_db()
    assert proposal.state == "posted"
    page = _client(approver).get(PAGE).content.decode()
    assert page.count("explained by an adjustment") == 4
    # The FOCUS export carries the posted lines as corrections.
    focus = _client(approver).get("/api/v1/exports/focus?period=2026-10")
    body = b"".join(focus.streaming_content).decode("utf-8-sig") if focus.streaming else focus.content.decode()  # type: ignore[attr-defined]
    bill_rows = [r for r in csv.DictReader(io.StringIO(body)) if r["x_Account"] == "6401.09"]
    assert len(bill_rows) == 4 and {r["ChargeClass"] for r in bill_rows} == {"Correction"}
    assert sum(Decimal(r["BilledCost"]) for r in bill_rows) == Decimal("9.43")
