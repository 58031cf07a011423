"""The reconciliation's line of the close checklist (apps/ledger/services/checklist.py, where
apps.py registers it): each active supplier's month against its bill."""

from __future__ import annotations

from datetime import date, datetime

from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.ledger.services.checklist import CheckItem, Entry
from apps.reconciliation.matching import month_reconcile


def supplier_bills(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    """Each active supplier's month against its bill (apps/reconciliation/): one not
    reconciled has no bill yet or differences no posted adjustment explains."""
    found = month_reconcile(month=month)
    loose = [r for r in found if not r.reconciled]
    page = f"{reverse('finance-reconciliation')}?month={month:%Y-%m}"
    items = tuple(
        Entry(
            r.supplier.name,
            _("no bill imported")
            if r.bill is None
            else _("%(count)s open differences, %(amount)s %(currency)s unexplained")
            % {"count": len(r.open), "amount": r.unreconciled, "currency": r.supplier.currency},
            page,
        )
        for r in loose
    )
    if loose:
        detail = _("Bills not reconciled: %(suppliers)s.") % {
            "suppliers": "; ".join(f"{e.name} ({e.figure})" for e in items[:10])
        }
    elif found:
        detail = _("Every supplier's bill of the month is imported and reconciled.")
    else:
        detail = _("No supplier is set up: there is no bill to reconcile.")
    label = gettext_noop("Supplier bills not reconciled")
    return CheckItem("supplier_bills", label, len(loose), not loose, detail, items=items)
