"""A close without dead ends: each checklist line that is not OK leads to a page listing exactly
its items (walked on demo books with loose ends added); each month-end finding is resolved, or
accepted with a reason, by a named person before the month is submitted, and the approved
checklist and the month pack say who, when and why; the supplier bills line."""

from __future__ import annotations

import io
import re
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.test import Client
from openpyxl import load_workbook

from apps.auditlog.models import AuditEntry
from apps.classification.models import HourlyClass
from apps.ledger.models import CloseRequest, FindingReview, Period
from apps.ledger.services.accrual import month_window
from apps.ledger.services.closing import CloseError, close_check, close_request_approve, close_request_submit
from apps.plans.planning import budget_set
from apps.reconciliation.imports import bill_import
from apps.reconciliation.matching import supplier_reconcile
from apps.reconciliation.models import Supplier
from tests.conftest import Collector
from tests.ledger.test_close_page import CLEAN, HOUR, LABEL, LAST, PAGE, person, priced, records

pytestmark = pytest.mark.django_db

ITEMS = re.compile(r'<table class="data" id="items">.*?</table>', re.S)
REVIEW = f"/finance/close/{LABEL}/review/"
FINDINGS = f"/finance/close/{LABEL}/items/open_findings/"


def not_ok_lines(html: str) -> dict[str, tuple[str, str]]:
    """Key -> (value shown, the Fix it link) of each line of the close page that is not OK."""
    rows = re.findall(r'<tr class="not" data-key="(\w+)">(.*?)</tr>', html, re.S)
    found = {}
    for key, row in rows:
        value = re.findall(r"<td>(.*?)</td>", row)[0]
        link = re.search(r'<a href="([^"]+)">Fix it</a>', row)
        assert link, f"{key}: no Fix it link"
        found[key] = (value, link.group(1))
    return found


def listed(html: str) -> list[tuple[str, int]]:
    """The items table's rows: (item, tokens where the row gives them)."""
    table = ITEMS.search(html)
    assert table, "no items table"
    rows = re.findall(r'<tr data-item="([^"]*)"(?: data-tokens="(\d+)")?>', table.group(0))
    return [(name, int(tokens or 0)) for name, tokens in rows]


def unassigned_tokens() -> int:
    window = month_window(LAST)
    found = HourlyClass.objects.filter(hour__gte=window.start, hour__lt=window.end, dims__business_line="")
    return int(found.aggregate(n=Sum("tokens"))["n"] or 0)


def test_every_line_not_ok_leads_to_a_page_listing_exactly_its_items(collector: Collector) -> None:
    call_command("demo_data", "--month", f"{LAST:%Y-%m}", "--records", "2000", stdout=io.StringIO())
    priced(collector, records(2, model="llama-3-70b", dims={"team": "nobody"}))  # unpriced, no line, not booked
    assert collector.send(records(1, hour=3)).json()["accepted"] == 1  # not priced yet: a dirty hour
    budget_set(business_line="ghost-line", month=LAST, amount=Decimal("100"), currency="CNY")
    Supplier.objects.create(name="openai", model_patterns=["gpt-4o*"])  # no bill yet
    _, finance = person("fiona")

    lines = not_ok_lines(finance.get(PAGE).content.decode())

    expected = {"unpriced_models", "unattributed", "days_not_accrued", "dirty_days", "open_findings"}
    assert expected | {"budgets_unspent", "supplier_bills"} <= set(lines)
    for key, (value, link) in lines.items():
        page = finance.get(link.replace("&amp;", "&"))
        assert page.status_code == 200, key
        items = listed(page.content.decode())
        assert items, f"{key}: the page lists nothing"
        if key == "unattributed":  # a share: its items are the models, with their tokens without a line
            assert sum(tokens for _, tokens in items) == unassigned_tokens() > 0
        else:
            assert len(items) == int(value.replace(",", "")), key
    assert ("ghost-line", 0) in listed(finance.get(lines["budgets_unspent"][1]).content.decode())
    assert ("openai", 0) in listed(finance.get(lines["supplier_bills"][1]).content.decode())


def test_an_unknown_line_is_a_404_and_other_roles_are_refused(as_role: Any) -> None:
    _, finance = person("fiona")
    assert finance.get(f"/finance/close/{LABEL}/items/nothing/").status_code == 404
    assert as_role("engineer").get(FINDINGS).status_code == 403
    assert as_role("engineer").post(REVIEW, {"kind": "x"}).status_code == 403


# --- findings resolved or accepted --------------------------------------------------------------


@pytest.fixture
def findings(collector: Collector) -> list[tuple[str, str]]:
    """A month whose checks find the effective share low (mostly timeouts): its findings' keys."""
    priced(collector, [*records(1), *records(3, **{"outcome.status": "timeout", "outcome.finish_reason": None})])
    found = close_check(key="open_findings", month=LAST).items
    assert found
    return [(e.finding.kind, e.finding.business_line) for e in found if e.finding is not None]


def review(client: Client, kind: str, line: str, decision: str, note: str = "") -> str:
    form = {"kind": kind, "business_line": line, "decision": decision, "note": note}
    return client.post(REVIEW, form, follow=True).content.decode()


def test_a_month_with_open_findings_cannot_be_submitted(findings: list[tuple[str, str]]) -> None:
    preparer, first = person("pat")

    answer = first.post(f"{PAGE}act/", {"action": "submit"}, follow=True).content.decode()

    assert f"{len(findings)} month-end findings of {LABEL} are neither resolved nor accepted" in answer
    assert not CloseRequest.objects.exists()
    with pytest.raises(CloseError, match="neither resolved nor accepted"):
        close_request_submit(month=LAST, user=preparer)


def test_each_finding_is_resolved_or_accepted_with_a_reason_by_a_named_person(
    findings: list[tuple[str, str]],
) -> None:
    _, first = person("pat")
    (kind, line), *rest = findings
    page = first.get(FINDINGS).content.decode()
    assert len(listed(page)) == len(findings) and 'action="/finance/close/' in page

    refused = review(first, kind, line, "accepted")
    assert "say why the finding is accepted" in refused and not FindingReview.objects.exists()
    done = review(first, kind, line, "accepted", "Known: the timeouts were a load test")

    assert "accepted by pat" in done
    stored = FindingReview.objects.get()
    assert (stored.kind, stored.business_line, stored.decision, stored.reviewed_by.username) == (
        kind,
        line,
        "accepted",
        "pat",
    )
    assert stored.note == "Known: the timeouts were a load test" and stored.figures
    assert len(listed(done)) == len(findings) - 1
    assert re.search(r'<tr data-item="[^"]+" data-decision="accepted">', done)
    for other_kind, other_line in rest:
        review(first, other_kind, other_line, "resolved", "Product owner notified")
    _, second = person("alex")
    again = review(second, kind, line, "resolved", "Load test removed from the schedule")  # a second word replaces it
    assert "resolved by alex" in again and "Change the decision" in again
    assert FindingReview.objects.get(kind=kind, business_line=line).reviewed_by.username == "alex"
    changes = AuditEntry.objects.filter(model="ledger.FindingReview", object_id=str(stored.pk)).order_by("id")
    assert [(e.action, e.actor_name) for e in changes] == [("create", "pat"), ("update", "alex")]
    assert close_check(key="open_findings", month=LAST).ok
    assert "is submitted for closing" in first.post(f"{PAGE}act/", {"action": "submit"}, follow=True).content.decode()


def test_a_scoped_user_reads_the_findings_but_cannot_review_them(findings: list[tuple[str, str]]) -> None:
    (kind, line), *_ = findings
    _, scoped = person("sam", lines=[line or "customer-service"])

    assert 'action="/finance/close/' not in scoped.get(FINDINGS).content.decode()
    assert scoped.post(REVIEW, {"kind": kind, "business_line": line, "decision": "resolved"}).status_code == 403
    assert not FindingReview.objects.exists()


def test_the_approved_checklist_and_the_month_pack_say_who_decided_when_and_why(
    findings: list[tuple[str, str]],
) -> None:
    _, first = person("pat")
    _, second = person("alex")
    for kind, line in findings:
        review(first, kind, line, "accepted", f"Accepted {kind}")
    first.post(f"{PAGE}act/", {"action": "submit"})
    second.post(f"{PAGE}act/", {"action": "approve"})
    assert Period.objects.get(month=LAST).status == "closed"

    page = second.get(PAGE).content.decode()
    assert "Checklist as approved" in page
    assert page.count('<li data-decision="accepted">') == len(findings) and "accepted by pat on" in page
    stored = CloseRequest.objects.get().checklist
    reviews = next(i["reviews"] for i in stored if i["key"] == "open_findings")
    assert [(r["kind"], r["by"], r["note"]) for r in reviews] == [(k, "pat", f"Accepted {k}") for k, _ in findings]
    assert f'href="/finance/pack/{LABEL}.xlsx"' in page
    assert f'<a href="{FINDINGS}">Resolved and accepted findings</a>' in page  # the stored line leads on too

    book = load_workbook(io.BytesIO(second.get(f"/finance/pack/{LABEL}.xlsx").content))
    sheet = book["Month-end findings"]
    header = [c.value for c in sheet[2]]  # a title row first
    rows = [dict(zip(header, (c.value for c in row), strict=True)) for row in sheet.iter_rows(min_row=3)]
    decided = [r for r in rows if r.get("Decided by")]
    assert [(r["Decision"], r["Decided by"], r["Reason"]) for r in decided] == [
        ("accepted", "pat", f"Accepted {k}") for k, _ in findings
    ]
    checklist = [row[0].value for row in book["Checklist as approved"].iter_rows(min_row=3)]
    assert sum(1 for label in checklist if label and label.startswith("  ")) == len(findings)


def test_approval_refuses_a_finding_that_appeared_after_the_submission(collector: Collector) -> None:
    priced(collector, records(4, **CLEAN))
    preparer, _first = person("pat")
    approver, _ = person("alex")
    close_request_submit(month=LAST, user=preparer)
    # Late records, all timeouts: the checks at the close now find the effective share low.
    collector.send(records(6, hour=5, **{"outcome.status": "timeout", "outcome.finish_reason": None}))

    with pytest.raises(CloseError, match="nobody resolved or accepted"):
        close_request_approve(month=LAST, user=approver)

    assert not Period.objects.filter(month=LAST, status="closed").exists()
    assert CloseRequest.objects.get().state == "submitted"


def test_the_chinese_findings_page_translates_its_words(findings: list[tuple[str, str]]) -> None:
    _, first = person("pat")
    first.cookies["django_language"] = "zh-hans"

    page = first.get(FINDINGS).content.decode()

    for chinese in ("未处理的检查结果", "已解决", "已接受", "需要处理的项目"):
        assert chinese in page
    for english in ("items to look at", "Where to act", "Resolved or accepted"):
        assert english not in page


# --- supplier bills -----------------------------------------------------------------------------


def test_the_supplier_bills_line_follows_the_bill_reconciliation(collector: Collector) -> None:
    assert close_check(key="supplier_bills", month=LAST).ok  # no supplier: nothing to reconcile
    priced(collector, records(2, model="qwen2.5-7b-instruct"))
    supplier = Supplier.objects.create(
        name="qwen-cloud", model_patterns=["qwen*"], col_day="date", col_model="model", col_amount="amount"
    )
    missing = close_check(key="supplier_bills", month=LAST)
    assert (missing.ok, missing.value, [(e.name, e.figure) for e in missing.items]) == (
        False,
        1,
        [("qwen-cloud", "no bill imported")],
    )

    row = f"{HOUR:%Y-%m-%d},qwen2.5-7b-instruct"
    bill_import(supplier=supplier, month=LAST, content=f"date,model,amount\n{row},1\n".encode())
    off = close_check(key="supplier_bills", month=LAST)
    assert not off.ok and "open differences" in off.items[0].figure

    platform = supplier_reconcile(supplier=supplier, month=LAST).platform_total
    bill_import(
        supplier=supplier,
        month=LAST,
        content=f"date,model,amount\n{row},{platform}\n".encode(),
    )
    assert close_check(key="supplier_bills", month=LAST).ok
