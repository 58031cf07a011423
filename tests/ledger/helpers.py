"""Reading back what the ledger wrote."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from apps.ledger.models import Account, JournalEntry, JournalLine

DAY1 = date(2026, 9, 10)
OCT = date(2026, 10, 1)
SEP = date(2026, 9, 1)
NOV = date(2026, 11, 1)


def at(day: date, hour: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def account(code: str) -> Account:
    return Account.objects.get(code=code)


def spend(**filters: Any) -> dict[tuple[str, str], Decimal]:
    """Net expense (debit - credit) per (account code, cost centre), expense accounts only."""
    rows = (
        JournalLine.objects.filter(account__kind="expense", **filters)
        .values("account__code", "cost_centre")
        .annotate(debit=Sum("debit"), credit=Sum("credit"))
    )
    return {(r["account__code"], r["cost_centre"]): r["debit"] - r["credit"] for r in rows}


def balanced() -> bool:
    """Every entry's debits equal its credits."""
    sums: dict[int, Decimal] = defaultdict(Decimal)
    for entry_id, debit, credit in JournalLine.objects.values_list("entry_id", "debit", "credit"):
        sums[entry_id] += debit - credit
    return all(v == 0 for v in sums.values())


def journal() -> list[tuple[Any, ...]]:
    """Every entry with its lines, comparable between runs."""
    return [
        (
            e.pk,
            e.kind,
            e.period_id,
            e.day,
            e.adjusts,
            e.currency,
            sorted(
                (ln.account_id, ln.cost_centre, ln.model_id or 0, ln.pool_id or 0, ln.debit, ln.credit, ln.tokens)
                for ln in e.lines.all()
            ),
        )
        for e in JournalEntry.objects.order_by("pk").prefetch_related("lines")
    ]
