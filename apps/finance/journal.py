"""The journal lines behind a finance number, as a table: each line with its account and cost
centre named, its debit, credit and tokens, what it was booked from, and a link to its usage."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum
from django.utils.translation import gettext as _

from apps.common.tables import Column, Table
from apps.ledger.links import bill_href, usage_href
from apps.ledger.models import Account, JournalLine
from apps.ledger.names import names_load
from apps.ledger.selectors import LineFilter, journal_lines

JOURNAL_PAGE = 500
ZERO = Decimal(0)


@dataclass
class Found:
    table: Table
    count: int  # lines matching, all pages
    debits: Decimal
    credits: Decimal
    more: bool  # another page follows


def journal_table(
    *,
    flt: LineFilter,
    business_lines: list[str] | None,
    expense_only: bool = False,
    currency: str | None = None,
    offset: int = 0,
) -> Found:
    """A page of the lines `flt` selects, only of `business_lines` unless None, only expense
    lines when `expense_only`, only one currency when given."""
    lines = journal_lines(flt=flt)
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    if expense_only:
        lines = lines.filter(account__kind=Account.Kind.EXPENSE)
    if currency:
        lines = lines.filter(currency=currency)
    sums = lines.aggregate(n=Count("id"), debits=Sum("debit"), credits=Sum("credit"))
    page = list(lines[offset : offset + JOURNAL_PAGE + 1])
    names = names_load()
    kinds = {"accrual": _("accrual"), "adjustment": _("adjustment"), "bill": _("bill adjustment")}
    rows: list[dict[str, Any]] = []
    table = Table(
        "journal",
        _("Journal lines, %(month)s") % {"month": f"{flt.month:%Y-%m}"},
        [
            Column("day", _("Day"), "date"),
            Column("entry", _("Entry")),
            Column("kind", _("Entry kind")),
            Column("account", _("Account")),
            Column("cost_centre", _("Cost centre")),
            Column("model", _("Model or pool")),
            Column("currency", _("Currency")),
            Column("debit", _("Debit"), "money"),
            Column("credit", _("Credit"), "money"),
            Column("tokens", _("Tokens"), "int"),
            Column("reasons", _("Booked from")),
            Column("usage", _("Usage")),
        ],
        rows,
        period=f"{flt.month:%Y-%m}",
    )
    for line in page[:JOURNAL_PAGE]:
        reasons = line.basis.get("reasons", {})
        href = bill_href(entry=line.entry) or usage_href(line=line)
        rows.append(
            {
                "day": line.day,
                "entry": str(line.entry_id),
                "kind": kinds.get(line.entry.kind, line.entry.kind),
                "account": names.account(line.account.code),
                "cost_centre": names.centre(line.cost_centre),
                "model": line.model.name if line.model_id else _pool(line),
                "currency": line.currency,
                "debit": line.debit,
                "credit": line.credit,
                "tokens": line.tokens,
                "reasons": ", ".join(f"{k} {v:,}" for k, v in sorted(reasons.items())),
                "usage": (_("supplier bill") if line.entry.kind == "bill" else _("usage")) if href else "",
            }
        )
        if href:
            table.links[(len(rows) - 1, "usage")] = href
    return Found(table, sums["n"], sums["debits"] or ZERO, sums["credits"] or ZERO, len(page) > JOURNAL_PAGE)


def _pool(line: JournalLine) -> str:
    """A pool's line (its idle capacity) named as a pool, in the reader's language."""
    return _("pool %(name)s") % {"name": line.pool.name} if line.pool_id else ""
