"""FOCUS 1.4 Invoice Detail from the supplier bills (docs/ledger.md, "Invoice Detail").

One row per line of each supplier's accepted bill of the billing period: the bill is the
supplier's invoice for the month (InvoiceId '<supplier>/<YYYY-MM>', InvoiceIssuerName the
supplier), a bill line its invoice line item (InvoiceDetailId '<InvoiceId>/<file line>'). A
bill line's amount has up to 6 places; BilledCost is to the cent, the bill's total shared out
over its lines (largest remainder), so an invoice's rows sum to the bill's total exactly and the
exact amount is kept in x_BilledAmount. Lines of 0 are included. The match against the platform
(apps.reconciliation.matching) is in x_Reconciled and x_Unreconciled, per invoice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from decimal import Decimal

from apps.common.buckets import month_of
from apps.exports.focus import _cost, _num, rows_csv
from apps.exports.focus14 import CENT, share_out, utc
from apps.ledger.services.accrual import month_window
from apps.reconciliation.matching import supplier_reconcile
from apps.reconciliation.models import Bill, BillLine

COLUMNS = (
    "BilledCost",
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "InvoiceDetailCreated",
    "InvoiceDetailDescription",
    "InvoiceDetailGrain",
    "InvoiceDetailId",
    "InvoiceDetailLastUpdated",
    "InvoiceId",
    "InvoiceIssueDate",
    "InvoiceIssueStatus",
    "InvoiceIssuerName",
    "PaymentCurrency",
    "PaymentDueDate",
    "PaymentTerms",
    "ReferenceInvoiceId",
    "x_BilledAmount",
    "x_BillingPeriod",
    "x_Day",
    "x_InputTokens",
    "x_Key",
    "x_Model",
    "x_OutputTokens",
    "x_Reconciled",
    "x_Unreconciled",
)
PAYMENT_TERMS = "Not stated"  # a bill file carries no terms; the column may not be null


def invoice_id(bill: Bill) -> str:
    return f"{bill.supplier.name}/{bill.month:%Y-%m}"


def invoice_detail_rows(*, month: date) -> Iterator[dict[str, str]]:
    """The Invoice Detail rows of the billing period, supplier by supplier (values as strings;
    null is '')."""
    month = month_of(month)
    window = month_window(month)
    bills = Bill.objects.filter(month=month, state=Bill.State.ACCEPTED).select_related("supplier")
    for bill in bills.order_by("supplier__name"):
        found = supplier_reconcile(supplier=bill.supplier, month=month)
        invoice, imported = invoice_id(bill), utc(bill.imported_at)
        fixed = {
            "BillingAccountId": bill.supplier.name,  # a bill file names no account: one per supplier
            "BillingCurrency": bill.currency,
            "BillingPeriodStart": utc(window.start),
            "BillingPeriodEnd": utc(window.end),
            "ChargeCategory": "Usage",
            "InvoiceDetailCreated": imported,
            "InvoiceDetailLastUpdated": imported,
            "InvoiceId": invoice,
            "InvoiceIssueDate": "",
            "InvoiceIssueStatus": "Issued",
            "InvoiceIssuerName": bill.supplier.name,
            "PaymentCurrency": bill.currency,
            "PaymentDueDate": "",
            "PaymentTerms": PAYMENT_TERMS,
            "ReferenceInvoiceId": invoice,
            "x_BillingPeriod": f"{month:%Y-%m}",
            "x_Reconciled": "true" if found.reconciled else "false",
            "x_Unreconciled": _cost(found.unreconciled),
        }
        lines = list(BillLine.objects.filter(bill=bill).order_by("row"))
        for line, billed in zip(lines, _billed(bill, lines), strict=True):
            yield fixed | _line(invoice, line, billed)


def _billed(bill: Bill, lines: list[BillLine]) -> list[Decimal]:
    """The bill's total over its lines, to the cent (by amount; evenly when they sum to 0)."""
    if not lines:
        return []
    weights = [line.amount for line in lines]
    if sum(weights, Decimal(0)) == 0 or len({w > 0 for w in weights if w}) > 1:
        return [line.amount.quantize(CENT) for line in lines]  # nothing to share: each line rounded
    return share_out(bill.total, weights, CENT)


def _line(invoice: str, line: BillLine, billed: Decimal) -> dict[str, str]:
    grain = {"SkuId": line.model, "x_Day": line.day.isoformat()}
    if line.key:
        grain["x_Key"] = line.key
    return {
        "BilledCost": _cost(billed),
        "InvoiceDetailDescription": f"{line.model} on {line.day}" + (f" ({line.key})" if line.key else ""),
        "InvoiceDetailGrain": json.dumps(grain, sort_keys=True, ensure_ascii=False),
        "InvoiceDetailId": f"{invoice}/{line.row}",
        "x_BilledAmount": _num(line.amount.normalize() + 0),
        "x_Day": line.day.isoformat(),
        "x_InputTokens": "" if line.input_tokens is None else str(line.input_tokens),
        "x_Key": line.key,
        "x_Model": line.model,
        "x_OutputTokens": "" if line.output_tokens is None else str(line.output_tokens),
    }


def invoice_detail_csv(*, month: date) -> Iterator[str]:
    """The CSV text of the billing period's Invoice Detail, a chunk at a time (header first)."""
    return rows_csv(COLUMNS, invoice_detail_rows(month=month))
