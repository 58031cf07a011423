"""The reconciliation page's tables (apps/common/tables.Table), which its CSV and XLSX downloads
share: each supplier's month, the differences with their figures, and the rows of refused
imports with their reasons. A user scoped to some business lines gets the differences of their
cost centres only, and no company totals."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.common.tables import Column, Table
from apps.ledger.names import names_load
from apps.reconciliation.matching import Difference, Reconciliation, month_reconcile
from apps.reconciliation.models import Bill, BillAdjustment, BillRowError, Supplier

KIND_LABELS = {
    "bill_only": gettext_noop("only on the bill"),
    "platform_only": gettext_noop("only in the platform"),
    "amount": gettext_noop("amount mismatch"),
    "tokens": gettext_noop("token mismatch"),
}

SUPPLIER_KINDS = {
    Supplier.Kind.HOSTED: gettext_noop("hosted API (priced usage)"),
    Supplier.Kind.POOL: gettext_noop("GPU pool (pool cost)"),
}
# The adjustments' states, as the page shows them ({% trans a.state %}).
STATE_LABELS = (gettext_noop("proposed"), gettext_noop("posted"), gettext_noop("rejected"))


@dataclass
class ReconciliationBoard:
    month: date
    scoped: list[str] | None
    reconciliations: list[Reconciliation]
    tables: list[Table]
    adjustments: list[BillAdjustment]
    suppliers: list[Supplier]

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)


def _visible(diff: Difference, lines: list[str] | None) -> bool:
    return lines is None or diff.business_line in lines


def _summary_table(found: list[Reconciliation], lines: list[str] | None, label: str) -> Table:
    rows = []
    for r in found:
        mine = [d for d in r.open if _visible(d, lines)]
        rows.append(
            {
                "supplier": r.supplier.name,
                "kind": _(SUPPLIER_KINDS[r.supplier.kind]),
                "currency": r.supplier.currency,
                "bill": r.bill.imported_at if r.bill else None,
                "bill_total": r.bill_total if lines is None else None,
                "platform_total": r.platform_total if lines is None else None,
                "open": len(mine),
                "unreconciled": sum((abs(d.residual) for d in mine), Decimal(0)),
                "state": _("reconciled") if r.bill is not None and not mine else _("to reconcile"),
            }
        )
    columns = [
        Column("supplier", _("Supplier")),
        Column("kind", _("Kind")),
        Column("currency", _("Currency")),
        Column("bill", _("Bill imported"), "datetime"),
        Column("bill_total", _("Bill"), "money"),
        Column("platform_total", _("Platform"), "money"),
        Column("open", _("Open differences"), "int"),
        Column("unreconciled", _("Unreconciled"), "money"),
        Column("state", _("State")),
    ]
    return Table("suppliers", _("Suppliers, %(month)s") % {"month": label}, columns, rows, period=label)


def _differences_table(found: list[Reconciliation], lines: list[str] | None, label: str) -> Table:
    names = names_load()
    rows = [
        {
            "supplier": d.supplier,
            "currency": d.currency,
            "day": d.day,
            "model": d.model,
            "key": d.key,
            "cost_centre": names.centre(d.business_line),
            "kind": _(KIND_LABELS[d.kind]),
            "bill_amount": d.bill_amount,
            "platform_amount": d.platform_amount,
            "difference": d.amount_diff,
            "bill_tokens": d.bill_tokens,
            "platform_tokens": d.platform_tokens,
            "tokens_difference": d.tokens_diff,
            "adjusted": d.adjusted_amount if d.adjusted_amount or d.adjusted_tokens else None,
            "state": _("explained by an adjustment") if d.explained else _("open"),
        }
        for r in found
        for d in r.differences
        if _visible(d, lines)
    ]
    columns = [
        Column("supplier", _("Supplier")),
        Column("currency", _("Currency")),
        Column("day", _("Day"), "date"),
        Column("model", _("Model")),
        Column("key", _("Key or project")),
        Column("cost_centre", _("Cost centre")),
        Column("kind", _("Difference")),
        Column("bill_amount", _("Bill"), "money"),
        Column("platform_amount", _("Platform"), "money"),
        Column("difference", _("Bill minus platform"), "money"),
        Column("bill_tokens", _("Bill tokens"), "int"),
        Column("platform_tokens", _("Platform tokens"), "int"),
        Column("tokens_difference", _("Token difference"), "int"),
        Column("adjusted", _("Adjusted"), "money"),
        Column("state", _("State")),
    ]
    return Table("differences", _("Bill differences, %(month)s") % {"month": label}, columns, rows, period=label)


def _errors_table(month: date, label: str) -> Table:
    """The rows of each supplier's latest import of the month when it was refused."""
    latest: dict[int, Bill] = {}
    for bill in Bill.objects.filter(month=month).select_related("supplier").order_by("imported_at", "id"):
        latest[bill.supplier_id] = bill
    refused = [b for b in latest.values() if b.state == Bill.State.REFUSED]
    rows = [
        {"supplier": e.bill.supplier.name, "file": e.bill.filename, "row": e.row, "reason": e.reason, "raw": e.raw}
        for e in BillRowError.objects.filter(bill__in=refused).select_related("bill__supplier")
    ]
    columns = [
        Column("supplier", _("Supplier")),
        Column("file", _("File")),
        Column("row", _("Line"), "int"),
        Column("reason", _("Reason")),
        Column("raw", _("Row as in the file")),
    ]
    return Table("errors", _("Refused rows, %(month)s") % {"month": label}, columns, rows, period=label)


def reconciliation_build(*, month: date, business_lines: list[str] | None) -> ReconciliationBoard:
    """The month's reconciliation as the page and its downloads show it to these business lines."""
    label = f"{month:%Y-%m}"
    found = month_reconcile(month=month)
    tables = [
        _summary_table(found, business_lines, label),
        _differences_table(found, business_lines, label),
    ]
    if business_lines is None:
        tables.append(_errors_table(month, label))
    adjustments = (
        list(BillAdjustment.objects.filter(month=month).select_related("supplier", "proposed_by", "decided_by"))
        if business_lines is None
        else []
    )
    return ReconciliationBoard(month, business_lines, found, tables, adjustments, [r.supplier for r in found])
