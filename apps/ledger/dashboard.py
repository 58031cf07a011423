"""The finance dashboard's tables and figures: spend by account and cost centre, budget vs
actual, the 12-month trend, period status and findings. Each table is a list of flat rows that
the page shows and downloads as CSV alike; figures are plotly, built here, drawn by the
locally served plotly.js."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from apps.common.buckets import month_of
from apps.ledger.models import Account, Finding
from apps.ledger.selectors import budget_vs_actual, ledger_matrix, periods_status, spend_trend

TREND_MONTHS = 12


@dataclass
class Table:
    name: str  # the download key (?download=<name>)
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    figure: str = ""  # plotly div and script, HTML

    def cells(self) -> list[list[Any]]:
        return [[row.get(c) for c in self.columns] for row in self.rows]


@dataclass
class Dashboard:
    month: date
    currency: str
    currencies: list[str]
    tables: list[Table] = field(default_factory=list)

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)


def _figure(fig: go.Figure, barmode: str = "stack") -> str:
    fig.update_layout(
        margin={"l": 40, "r": 10, "t": 30, "b": 40}, height=320, barmode=barmode, legend={"orientation": "h"}
    )
    html: str = fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})
    return html


def dashboard_build(*, month: date, currency: str | None = None, business_lines: list[str] | None = None) -> Dashboard:
    """The page's tables; `business_lines` (a user's scope, None = all) limits spend, budgets,
    trend and findings to those cost centres."""
    month = month_of(month)
    start = month_of(month - timedelta(days=365 - 31))
    trend = spend_trend(start=start, end=month, business_lines=business_lines)
    matrix = ledger_matrix(start=month, end=month, business_lines=business_lines)
    currencies = sorted({r["currency"] for r in trend} | {r["currency"] for r in matrix}) or ["CNY"]
    shown = currency if currency is not None and currency in currencies else currencies[0]
    board = Dashboard(month, shown, currencies)
    board.tables = [
        _spend_table(month, [r for r in matrix if r["currency"] == shown]),
        _budget_table(month, shown, business_lines),
        _trend_table([r for r in trend if r["currency"] == shown]),
        _periods_table(),
        _findings_table(month, business_lines),
    ]
    return board


def _spend_table(month: date, matrix: list[dict[str, Any]]) -> Table:
    accounts = [a.code for a in Account.objects.filter(kind=Account.Kind.EXPENSE)]
    by_cc: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in matrix:
        by_cc[row["cost_centre"]][row["account"]] += row["amount"]
    rows: list[dict[str, Any]] = [
        {"cost_centre": cc, **{a: spent.get(a, Decimal(0)) for a in accounts}, "total": sum(spent.values(), Decimal(0))}
        for cc, spent in sorted(by_cc.items())
    ]
    fig = go.Figure(
        [go.Bar(name=a, x=[r["cost_centre"] for r in rows], y=[float(r[a]) for r in rows]) for a in accounts]
    )
    return Table(
        "spend",
        _("Spend by account and cost centre, %(month)s") % {"month": f"{month:%Y-%m}"},
        ["cost_centre", *accounts, "total"],
        rows,
        _figure(fig),
    )


def _budget_table(month: date, currency: str, business_lines: list[str] | None) -> Table:
    rows = [r for r in budget_vs_actual(month=month, business_lines=business_lines) if r["currency"] in (currency, "")]
    columns = [
        "business_line",
        "budget_amount",
        "actual_amount",
        "amount_used",
        "budget_tokens",
        "actual_tokens",
        "tokens_used",
    ]
    names = [r["business_line"] for r in rows]
    fig = go.Figure(
        [
            go.Bar(name="budget", x=names, y=[float(r["budget_amount"] or 0) for r in rows]),
            go.Bar(name="actual", x=names, y=[float(r["actual_amount"]) for r in rows]),
        ]
    )
    return Table(
        "budget",
        _("Budget vs actual, %(month)s (%(currency)s)") % {"month": f"{month:%Y-%m}", "currency": currency},
        columns,
        rows,
        _figure(fig, "group"),
    )


def _trend_table(trend: list[dict[str, Any]]) -> Table:
    months = sorted({r["month"] for r in trend})
    accounts = sorted({r["account"] for r in trend})
    amounts = {(r["month"], r["account"]): r["amount"] for r in trend}
    rows = [{"month": m, **{a: amounts.get((m, a), Decimal(0)) for a in accounts}} for m in months]
    fig = go.Figure([go.Bar(name=a, x=months, y=[float(amounts.get((m, a), 0)) for m in months]) for a in accounts])
    return Table(
        "trend",
        _("Spend by account, last %(months)d months") % {"months": TREND_MONTHS},
        ["month", *accounts],
        rows,
        _figure(fig),
    )


def _periods_table() -> Table:
    columns = ["month", "status", "closed_at", "closed_by", "days_booked", "booked_through", "adjustments_posted"]
    return Table("periods", _("Periods"), columns, periods_status(months=TREND_MONTHS))


def _findings_table(month: date, business_lines: list[str] | None) -> Table:
    findings = Finding.objects.filter(period=month)
    if business_lines is not None:
        findings = findings.filter(business_line__in=business_lines)
    rows = list(findings.values("kind", "business_line", "action", "message", "delivered_at"))
    return Table(
        "findings",
        _("Month-end findings, %(month)s") % {"month": f"{month:%Y-%m}"},
        ["kind", "business_line", "action", "message", "delivered_at"],
        rows,
    )
