"""The finance page: the month's books as finance reads them (account codes and names, cost
centres by name, money and percentages formatted by column kind), month-over-month change and
budget variance, the trial balance, waste reconciled to /waste/, the trend, periods and
findings. Every table is an apps.common.tables.Table, so the page, the CSV and the spreadsheet
share it; every number links to its journal lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from apps.common.buckets import month_of, next_month, previous_month
from apps.common.tables import Table
from apps.finance import tables
from apps.finance.waste import waste_tables
from apps.ledger.models import Account
from apps.ledger.names import names_load
from apps.ledger.selectors import ledger_matrix, spend_trend

TREND_MONTHS = tables.TREND_MONTHS


@dataclass
class Dashboard:
    month: date
    currency: str
    currencies: list[str]
    scoped: list[str] | None = None  # the user's business lines; None: every line
    tables: list[Table] = field(default_factory=list)

    @property
    def previous(self) -> str:
        return f"{previous_month(self.month):%Y-%m}"

    @property
    def next(self) -> str:
        return f"{next_month(self.month):%Y-%m}"

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)


def dashboard_build(*, month: date, currency: str | None = None, business_lines: list[str] | None = None) -> Dashboard:
    """The page's tables; `business_lines` (a user's scope, None = all) limits every table to
    those cost centres."""
    month = month_of(month)
    start = month_of(month - timedelta(days=365 - 31))
    trend = spend_trend(start=start, end=month, business_lines=business_lines)
    matrix = ledger_matrix(start=previous_month(month), end=month, business_lines=business_lines)
    currencies = sorted({r["currency"] for r in trend} | {r["currency"] for r in matrix}) or ["CNY"]
    shown = currency if currency is not None and currency in currencies else currencies[0]
    board = Dashboard(month, shown, currencies, business_lines)
    names = names_load()
    accounts = list(Account.objects.filter(kind=Account.Kind.EXPENSE))
    matrix = [r for r in matrix if r["currency"] == shown]
    this = [r for r in matrix if r["month"] == f"{month:%Y-%m}"]
    board.tables = [
        tables.spend_table(month=month, currency=shown, matrix=this, accounts=accounts, names=names),
        tables.centres_table(month=month, currency=shown, matrix=matrix, names=names, business_lines=business_lines),
        tables.accounts_table(month=month, currency=shown, matrix=matrix, accounts=accounts, names=names),
        *waste_tables(month=month, currency=shown, names=names, business_lines=business_lines),
        tables.trial_balance_table(month=month, currency=shown, names=names, business_lines=business_lines),
        tables.trend_table(trend=[r for r in trend if r["currency"] == shown], names=names, currency=shown),
        tables.periods_table(),
        tables.findings_table(month=month, names=names, business_lines=business_lines),
    ]
    return board
