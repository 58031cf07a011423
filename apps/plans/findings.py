"""The plans' month-end check (registered with the books' checks in apps.py): elastic spend over
LEDGER_ELASTIC_REVENUE_MAX (3 %) of the month's revenue -> a degradation audit; elastic spend with
no revenue entered -> a finding asking for it."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from apps.common.buckets import next_month
from apps.ledger import conf
from apps.ledger.models import Account, Finding
from apps.ledger.services.checks import pct, spend_of
from apps.plans.models import Revenue


def elastic_vs_revenue(month: date) -> list[Finding]:
    """What the check finds for `month` now, unsaved (the books' month_findings gathers it)."""
    elastic = spend_of(month, next_month(month), Account.Role.ELASTIC)
    revenue = {(r.business_line, r.currency): r.amount for r in Revenue.objects.filter(month=month)}
    maximum = Decimal(conf.get("LEDGER_ELASTIC_REVENUE_MAX"))
    findings = []
    for (_, bl, currency), got in sorted(elastic.items()):
        amount = got["amount"]
        if amount <= 0:
            continue
        income = revenue.get((bl, currency))
        figures = {"elastic": str(amount), "currency": currency, "revenue": None if income is None else str(income)}
        if income is None:
            kind, action = Finding.Kind.REVENUE_MISSING, Finding.Action.ENTER_REVENUE
            message = (
                f"{bl} spent {amount} {currency} on elastic tokens in {month:%Y-%m} but no revenue "
                "was entered for it: enter the month's revenue to check elastic spend against it."
            )
        elif income == 0 or amount / income > maximum:
            ratio = amount / income if income else None
            figures["ratio"] = None if ratio is None else str(ratio.quantize(Decimal("0.0001")))
            figures["limit"] = str(maximum)
            share = pct(ratio) if ratio is not None else "all"
            kind, action = Finding.Kind.ELASTIC_OVER_REVENUE, Finding.Action.DEGRADATION_AUDIT
            message = (
                f"Elastic token spend of {bl} in {month:%Y-%m} was {amount} {currency}, {share} of its "
                f"revenue {income} {currency} (limit {pct(maximum)}): start a degradation-strategy audit."
            )
        else:
            continue
        findings.append(
            Finding(kind=kind, action=action, period=month, business_line=bl, figures=figures, message=message)
        )
    return findings
