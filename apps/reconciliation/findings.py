"""The month-end check of the bills: a supplier whose accepted bill leaves more unexplained
money than its threshold (Supplier.finding_threshold) raises one company-wide finding for the
month, naming each such supplier with its figures. A supplier without an imported bill is not
checked (the reconciliation page shows it as missing)."""

from __future__ import annotations

from datetime import date

from apps.ledger.models import Finding
from apps.reconciliation.matching import month_reconcile


def bill_findings(*, month: date) -> list[Finding]:
    """What the bill check finds for `month` now, unsaved (month_findings gathers it)."""
    found = month_reconcile(month=month)
    over = [r for r in found if r.bill is not None and r.unreconciled > r.supplier.finding_threshold]
    if not over:
        return []
    # Unreconciled/threshold per supplier.
    named = "; ".join(
        f"{r.supplier.name} {r.unreconciled}/{r.supplier.finding_threshold} {r.supplier.currency}" for r in over
    )
    figures = {
        "named": named,  # names and numbers only: it goes into either language's chat message
        "suppliers": [
            {
                "supplier": r.supplier.name,
                "currency": r.supplier.currency,
                "unreconciled": str(r.unreconciled),
                "threshold": str(r.supplier.finding_threshold),
                "differences": len(r.open),
            }
            for r in over
        ],
    }
    return [
        Finding(
            kind=Finding.Kind.BILL_UNRECONCILED,
            action=Finding.Action.RECONCILE_BILL,
            period=month,
            business_line="",
            figures=figures,
            message=f"Supplier bills of {month:%Y-%m} leave unexplained differences over their threshold: {named}. "
            "Review them on the reconciliation page and post adjusting entries.",
        )
    ]
