"""FOCUS 1.4: a real month (records through the collector API, classified, priced, booked, a
supplier's bill imported and its differences posted) exported through the API as Cost and Usage
and Invoice Detail, held to the specification's column requirements (focus_conformance.py);
the Invoice Detail rows sum to the bills, the cost rows to the books."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F, Sum
from django.test import Client

from apps.accounts.models import UserScope
from apps.exports import focus, focus14, invoice_detail
from apps.ledger.models import Account, JournalLine, MappingRule
from apps.ledger.services.accrual import month_accrue
from apps.reconciliation.adjustments import adjustment_approve, adjustment_propose
from apps.reconciliation.imports import bill_import
from apps.reconciliation.models import Bill
from tests import factories
from tests.conftest import Collector
from tests.currencies.test_currencies import usd_usage_build
from tests.exports.focus_conformance import cost_and_usage_violations, invoice_detail_violations
from tests.ledger.helpers import DAY1, OCT, SEP, at
from tests.reconciliation.test_reconciliation import hosted, hosted_bill, platform_build, users

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]


def _get(client: Client, query: str) -> tuple[list[str], list[dict[str, str]]]:
    response = client.get(f"/api/v1/exports/focus?{query}")
    assert response.status_code == 200, response.content
    reader = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    rows = list(reader)
    return list(reader.fieldnames or ()), rows


def _books(month: Any) -> Decimal:
    lines = JournalLine.objects.filter(period_id=month, account__kind="expense")
    return lines.aggregate(t=Sum(F("debit") - F("credit")))["t"] or Decimal(0)


@pytest.fixture
def october(collector: Collector) -> Any:
    """October booked, the hosted supplier's bill imported and its differences posted."""
    platform_build(collector)
    supplier, (preparer, approver) = hosted(), users()
    bill_import(supplier=supplier, month=OCT, content=hosted_bill())
    adjustment_approve(adjustment_id=adjustment_propose(supplier=supplier, month=OCT, user=preparer).pk, user=approver)
    return approver


def test_a_month_exported_as_focus_1_4_passes_the_conformance_test(october: Any, as_role: Any) -> None:
    header, rows = _get(as_role("finance"), "period=2026-10")

    assert tuple(header) == focus14.COLUMNS
    assert cost_and_usage_violations(header, rows) == []
    assert sum(Decimal(r["BilledCost"]) for r in rows) == _books(OCT)  # the parts sum to the books
    kinds = {(r["SkuId"], r["SkuMeter"]) for r in rows if r["x_TokenKind"]}
    assert {("gpt-4o", "Input Tokens"), ("gpt-4o", "Cached Input Tokens"), ("gpt-4o", "Output Tokens")} <= kinds
    assert {r["ChargeClass"] for r in rows if r["x_Account"] == "6401.09"} == {"Correction"}  # the bill's
    assert any(r["SkuId"].startswith("pool:") and r["PricingUnit"] == "Hours" for r in rows)  # idle capacity
    # A price book row: 2000 a million input tokens, exactly.
    inputs = {r["ListUnitPrice"] for r in rows if r["SkuId"] == "gpt-4o" and r["x_TokenKind"] == "uncached_prompt"}
    assert inputs == {"2000"}


def test_the_invoice_detail_rows_sum_to_the_reconciled_bills(october: Any, as_role: Any) -> None:
    header, rows = _get(as_role("finance"), "period=2026-10&dataset=invoice-detail")

    assert tuple(header) == invoice_detail.COLUMNS
    assert invoice_detail_violations(header, rows) == []
    bill = Bill.objects.get(month=OCT, state=Bill.State.ACCEPTED)
    assert bill.lines.count() == len(rows) == 7
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        totals[row["InvoiceId"]] += Decimal(row["BilledCost"])
    assert totals == {"openai/2026-10": bill.total}
    assert sum(Decimal(r["x_BilledAmount"]) for r in rows) == sum(line.amount for line in bill.lines.all())
    assert {(r["InvoiceIssuerName"], r["x_Reconciled"], r["x_Unreconciled"]) for r in rows} == {
        ("openai", "true", "0.00")
    }
    assert json.loads(rows[0]["InvoiceDetailGrain"]) == {"SkuId": "gpt-4o", "x_Day": "2026-10-03", "x_Key": "alpha"}


def test_an_unreconciled_bill_says_so_on_its_invoice_rows(collector: Collector, as_role: Any) -> None:
    platform_build(collector)
    bill_import(supplier=hosted(), month=OCT, content=hosted_bill())

    header, rows = _get(as_role("admin"), "period=2026-10&dataset=invoice-detail")

    assert invoice_detail_violations(header, rows) == []
    assert {(r["x_Reconciled"], r["x_Unreconciled"]) for r in rows} == {("false", "15.57")}  # 3.07 + 5.00 + 7.50


def test_a_line_is_split_by_token_kind_reason_and_caller_and_sums_to_the_line(as_role: Any) -> None:
    hour = at(DAY1, 1)
    web, batch = {"business_line": "search", "caller": "web"}, {"business_line": "search", "caller": "batch"}
    factories.hourly_cost(hour=hour, cost="0.333333", tokens=1_000_000, dims=web)
    factories.hourly_cost(hour=hour, cost="0.333333", tokens=1_000_000, dims=batch)
    factories.hourly_cost(hour=hour, cost="1.0", tokens=500_000, dims=web, component="output")
    factories.hourly_cost(
        hour=hour, cost="0.2", tokens=100_000, dims=web, reason="effective.output", component="output"
    )
    month_accrue(month=SEP)

    header, rows = _get(as_role("finance"), "period=2026-09")

    assert cost_and_usage_violations(header, rows) == []
    (line,) = JournalLine.objects.filter(period_id=SEP, account__kind="expense", account__code="6401.01")
    parts = [r for r in rows if r["x_JournalLineId"] == str(line.pk)]
    assert sorted((r["x_Caller"], r["x_Reason"], r["x_TokenKind"], r["ConsumedQuantity"]) for r in parts) == [
        ("batch", "effective.input", "uncached_prompt", "1000000"),
        ("web", "effective.input", "output", "500000"),
        ("web", "effective.input", "uncached_prompt", "1000000"),
        ("web", "effective.output", "output", "100000"),
    ]
    assert sum(Decimal(r["BilledCost"]) for r in parts) == line.debit == Decimal("1.87")
    assert {r["x_TokenClass"] for r in parts} == {"effective"}
    output = next(r for r in parts if r["x_Reason"] == "effective.output")
    assert (output["ListUnitPrice"], output["PricingQuantity"], output["BilledCost"]) == ("2", "0.1", "0.20")
    assert output["SkuPriceId"].startswith("qwen2.5-7b-instruct/output/pv")


def test_the_conformance_test_catches_broken_rows(as_role: Any) -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="1.50", tokens=1_000_000)
    month_accrue(month=SEP)
    header, (row,) = _get(as_role("finance"), "period=2026-09")
    assert cost_and_usage_violations(header, [row]) == []

    broken = [
        ({"ChargeCategory": "Refund"}, "not an allowed value"),
        ({"BilledCost": "1.5e0"}, "BilledCost: not Decimal"),
        ({"ListCost": "9.99"}, "ListCost 9.99 is not ListUnitPrice x PricingQuantity"),
        ({"EffectiveCost": "1.49"}, "EffectiveCost differs from BilledCost"),
        ({"ChargePeriodEnd": row["ChargePeriodStart"]}, "ChargePeriodStart is not before ChargePeriodEnd"),
        ({"BillingCurrency": "RMB"}, "is not a currency code"),
        ({"ChargePeriodStart": "2026-09-10T00:00:00+08:00"}, "ChargePeriodStart: not Date/Time"),
        ({"PricingUnit": "1e6 Tokens"}, "is not in Unit Format"),
        ({"PricingUnit": "million tokens"}, "is not in Unit Format"),
        ({"ConsumedUnit": ""}, "ConsumedUnit is null exactly when"),
        ({"SkuPriceId": ""}, "SkuPriceId: null on usage"),
        ({"SkuPriceDetails": '{"TokenKind": "input"}'}, "neither FOCUS-defined nor x_"),
        ({"ServiceSubcategory": "Chat"}, "ServiceSubcategory: 'Chat' is not an allowed value"),
        ({"ServiceCategory": "Compute"}, "ServiceSubcategory under another parent"),
        ({"BillingAccountId": ""}, "BillingAccountId: null"),
    ]
    for change, message in broken:
        found = cost_and_usage_violations(header, [row | change])
        assert any(message in f for f in found), (change, found)
    assert "missing column SkuId" in cost_and_usage_violations([c for c in header if c != "SkuId"], [row])
    assert "deprecated column ProviderName" in cost_and_usage_violations([*header, "ProviderName"], [row])
    dearer = row | {"PricingCurrencyListUnitPrice": "2", "ListUnitPrice": "2", "ListCost": "3.00"}
    assert any("has list prices" in f for f in cost_and_usage_violations(header, [row, dearer]))
    assert any("has SkuIds" in f for f in cost_and_usage_violations(header, [row, row | {"SkuId": "other"}]))


def test_focus_1_2_stays_an_option_and_a_bad_choice_is_refused(as_role: Any) -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="1.50", tokens=1_000_000)
    month_accrue(month=SEP)
    client = as_role("finance")

    header, rows = _get(client, "period=2026-09&focus_version=1.2")

    assert tuple(header) == focus.COLUMNS and len(rows) == 1 and rows[0]["ProviderName"]
    for query, field in (("focus_version=1.3", "focus_version"), ("dataset=prices", "dataset")):
        response = client.get(f"/api/v1/exports/focus?period=2026-09&{query}")
        assert response.status_code == 400 and field in response.json(), response.content
    response = client.get("/api/v1/exports/focus?period=2026-09&focus_version=1.2&dataset=invoice-detail")
    assert response.status_code == 400


def test_a_scoped_user_gets_their_cost_centres_parts_and_no_invoice_detail(as_role: Any) -> None:
    for line in ("search", "support"):
        dims = {"business_line": line}
        factories.hourly_cost(hour=at(DAY1, 1), cost="1.00", tokens=1000, dims=dims)
        factories.hourly_cost(hour=at(DAY1, 1), cost="2.00", tokens=250, dims=dims, component="output")
    month_accrue(month=SEP)
    user = factories.finance_user("scoped", role="finance")
    UserScope.objects.create(user=user, business_lines=["search"])
    client = Client()
    client.force_login(user)

    header, rows = _get(client, "period=2026-09")

    assert cost_and_usage_violations(header, rows) == []
    assert sorted((r["SubAccountId"], r["x_TokenKind"], r["BilledCost"]) for r in rows) == [
        ("search", "output", "2.00"),
        ("search", "uncached_prompt", "1.00"),
    ]
    assert client.get("/api/v1/exports/focus?period=2026-09&dataset=invoice-detail").status_code == 403


def test_the_command_writes_either_version_and_dataset(october: Any, tmp_path: Path) -> None:
    out = tmp_path / "focus.csv"
    call_command("export_focus", "2026-10", "--output", str(out))
    reader = csv.DictReader(io.StringIO(out.read_text()))
    assert (
        tuple(reader.fieldnames or ()) == focus14.COLUMNS
        and cost_and_usage_violations(list(reader.fieldnames or ()), list(reader)) == []
    )
    call_command("export_focus", "2026-10", "--dataset", "invoice-detail", "--output", str(out))
    assert out.read_text().startswith("BilledCost,BillingAccountId,BillingCurrency,")
    call_command("export_focus", "2026-10", "--focus-version", "1.2", "--output", str(out))
    assert out.read_text().startswith(",".join(focus.COLUMNS))
    with pytest.raises(CommandError, match=r"Invoice Detail is a FOCUS 1\.4 dataset"):
        call_command("export_focus", "2026-10", "--focus-version", "1.2", "--dataset", "invoice-detail")


def test_any_month_boundary_keeps_the_charge_in_its_billing_period(as_role: Any) -> None:
    last = datetime(2026, 9, 30, 23, tzinfo=UTC)
    factories.hourly_cost(hour=last, cost="1.00", tokens=1000)
    factories.hourly_cost(hour=last + timedelta(hours=1), cost="2.00", tokens=2000)
    month_accrue(month=SEP)
    month_accrue(month=OCT)

    sep, oct_ = _get(as_role("finance"), "period=2026-09")[1], _get(as_role("finance"), "period=2026-10")[1]

    assert [(r["BilledCost"], r["ChargePeriodStart"]) for r in sep] == [("1.00", "2026-09-30T00:00:00Z")]
    assert [(r["BilledCost"], r["ChargePeriodStart"]) for r in oct_] == [("2.00", "2026-10-01T00:00:00Z")]


def test_a_month_priced_in_usd_and_billed_in_cny_conforms(collector: Collector, as_role: Any) -> None:
    usd_usage_build(collector)
    month_accrue(month=OCT)

    header, rows = _get(as_role("finance"), "period=2026-10")

    assert cost_and_usage_violations(header, rows) == []
    assert {(r["BillingCurrency"], r["PricingCurrency"]) for r in rows} == {("CNY", "USD")}
    assert sum(Decimal(r["BilledCost"]) for r in rows) == _books(OCT)
    for line in JournalLine.objects.filter(period_id=OCT, account__kind="expense"):  # exact as priced, per line
        parts = [r for r in rows if r["x_JournalLineId"] == str(line.pk)]
        assert sum(Decimal(r["PricingCurrencyEffectiveCost"]) for r in parts) == line.original_amount
    output = [r for r in rows if r["x_TokenKind"] == "output"]
    assert output and {r["PricingCurrencyListUnitPrice"] for r in output} == {"8000"}  # USD a million, as priced
    for row in output:  # in CNY at the day's rate
        assert Decimal(row["ListUnitPrice"]) == 8000 * Decimal(row["x_ExchangeRate"])


@pytest.mark.books_in("Asia/Shanghai")
def test_a_month_booked_in_shanghai_conforms_in_utc(as_role: Any) -> None:
    factories.hourly_cost(hour=datetime(2026, 9, 30, 15, tzinfo=UTC), cost="1.00", tokens=1000)  # Sep 30, 23:00 there
    factories.hourly_cost(hour=datetime(2026, 9, 30, 16, tzinfo=UTC), cost="2.00", tokens=2000)  # Oct 1, 00:00 there
    month_accrue(month=SEP)
    month_accrue(month=OCT)

    header, rows = _get(as_role("finance"), "period=2026-10")

    assert cost_and_usage_violations(header, rows) == []
    (row,) = rows  # the local midnight in UTC, the local day and month beside it
    assert (row["BilledCost"], row["ChargePeriodStart"], row["ChargePeriodEnd"]) == (
        "2.00",
        "2026-09-30T16:00:00Z",
        "2026-10-01T16:00:00Z",
    )
    assert (row["BillingPeriodStart"], row["BillingPeriodEnd"]) == ("2026-09-30T16:00:00Z", "2026-10-31T16:00:00Z")
    assert (row["x_ChargeDay"], row["x_BillingPeriod"]) == ("2026-10-01", "2026-10")


def test_a_line_booked_under_rules_since_changed_is_one_row_at_its_mean_price(as_role: Any) -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="1.00", tokens=1_000_000)
    factories.hourly_cost(hour=at(DAY1, 1), cost="3.00", tokens=500_000, component="output")
    month_accrue(month=SEP)
    waste = Account.objects.get(code="6401.04")
    MappingRule.objects.filter(token_class="effective").update(account=waste)  # not yet re-booked

    header, rows = _get(as_role("finance"), "period=2026-09")

    assert cost_and_usage_violations(header, rows) == []
    (row,) = rows
    assert (row["SkuPriceId"], row["x_TokenKind"], row["BilledCost"]) == ("qwen2.5-7b-instruct/all", "", "4.00")
    assert (row["ListUnitPrice"], row["PricingQuantity"], row["PricingCategory"]) == ("2.666666666667", "1.5", "Other")
