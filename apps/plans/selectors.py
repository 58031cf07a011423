"""Budget against actual per business line, as the API, the month pack and the finance pages
read it."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import F, Sum

from apps.common.buckets import month_of
from apps.ledger import conf
from apps.ledger.models import Account, JournalLine
from apps.plans.budget_state import tokens_by_line
from apps.plans.models import Budget

ZERO = Decimal(0)


def budget_vs_actual(*, month: date, business_lines: list[str] | None = None) -> list[dict[str, Any]]:
    """Per business line: the month's budget (money and/or tokens) and what was posted to its
    expense accounts in the month (adjustments included), with the share used; only the lines
    in `business_lines` unless it is None. Tokens are two figures: `actual_tokens`, the
    processed tokens booked (padding, rejected drafts and recompute included, once priced), and
    `used_tokens`, what a token budget counts (prompt + completion as records arrive, as the
    edge, the alerts and the budgets page count it): `tokens_used` is the share of the latter."""
    month = month_of(month)
    counted = tokens_by_line(month=month, unassigned=conf.get("LEDGER_UNASSIGNED"))
    actual: dict[str, dict[str, Any]] = defaultdict(lambda: {"amounts": defaultdict(Decimal), "tokens": 0})
    lines = JournalLine.objects.filter(period_id=month, account__kind=Account.Kind.EXPENSE)
    budget_rows = Budget.objects.of_lines().filter(month=month)
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
        budget_rows = budget_rows.filter(business_line__in=business_lines)
    rows = lines.values("cost_centre", "currency").annotate(net=Sum(F("debit") - F("credit")), tokens=Sum("tokens"))
    for row in rows:
        actual[row["cost_centre"]]["amounts"][row["currency"]] += row["net"]
        actual[row["cost_centre"]]["tokens"] += row["tokens"]
    budgets = {b.business_line: b for b in budget_rows}
    result = []
    for bl in sorted(set(actual) | set(budgets)):
        budget, got = budgets.get(bl), actual[bl]
        currency = budget.currency if budget and budget.currency else next(iter(sorted(got["amounts"])), "")
        spent = got["amounts"].get(currency, ZERO)
        result.append(
            {
                "month": f"{month:%Y-%m}",
                "business_line": bl,
                "currency": currency,
                "budget_amount": budget.amount if budget else None,
                "actual_amount": spent,
                "amount_used": _share(spent, budget.amount if budget else None),
                "budget_tokens": budget.tokens if budget else None,
                "actual_tokens": got["tokens"],
                "used_tokens": counted.get(bl, 0),
                "tokens_used": _share(Decimal(counted.get(bl, 0)), budget.tokens if budget else None),
            }
        )
    return result


def _share(actual: Decimal, budget: Decimal | int | None) -> Decimal | None:
    if not budget:
        return None
    return (actual / Decimal(budget)).quantize(Decimal("0.0001"))
