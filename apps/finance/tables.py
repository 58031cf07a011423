"""The finance page's tables over the journal: spend by account and cost centre, cost centres
against the previous month and the budget, accounts against the previous month, the trial
balance, the 12-month trend, periods and findings. Rows hold raw values (Decimal money,
fraction percentages); every number links to the journal lines it sums."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import plotly.graph_objects as go
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from apps.common.buckets import previous_month
from apps.common.charts import chart_html, month_axis, themed
from apps.common.tables import Column, Table, month_table
from apps.ledger.links import journal_href
from apps.ledger.models import Account, Finding
from apps.ledger.names import Names
from apps.ledger.selectors import periods_status, trial_balance
from apps.plans.models import Budget
from apps.plans.variance import EXPENSE, MonthProgress, forecast, month_progress, pro_rated, variance

ZERO = Decimal(0)
TREND_MONTHS = 12


def figure_html(fig: go.Figure, barmode: str = "stack", *, period: str = "") -> str:
    return chart_html(themed(fig, barmode=barmode, period=period))


def change(now: Decimal, before: Decimal | None) -> tuple[Decimal | None, Decimal | None]:
    """(now - before, that as a fraction of before); the fraction is None without a base."""
    if before is None:
        return None, None
    delta = now - before
    return delta, (delta / before).quantize(Decimal("0.0001")) if before else None


def _against_previous(now: Decimal, before: Decimal | None) -> dict[str, Decimal | None]:
    """A row's cells of this month against the previous one (the columns of
    _against_previous_columns): both amounts, the change and the change as a fraction."""
    delta, delta_pct = change(now, before)
    return {"actual": now, "previous": before, "change": delta, "change_pct": delta_pct}


def _against_previous_columns(currency: str) -> list[Column]:
    return [
        Column("actual", money_label(_("This month"), currency), "money"),
        Column("previous", money_label(_("Previous month"), currency), "money"),
        Column("change", money_label(pgettext("amount", "Change"), currency), "money"),
        Column("change_pct", _("Change %"), "pct"),
    ]


def money_label(label: str, currency: str) -> str:
    return f"{label} ({currency})"


def spend_table(
    *, month: date, currency: str, matrix: list[dict[str, Any]], accounts: list[Account], names: Names
) -> Table:
    """Net expense per cost centre (rows) and account (columns), with totals both ways."""
    codes = [a.code for a in accounts]
    by_cc: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in matrix:
        by_cc[row["cost_centre"]][row["account"]] += row["amount"]
    table = month_table(
        "spend",
        _("Spend by account and cost centre, %(month)s (%(currency)s)"),
        [
            Column("cost_centre", _("Cost centre")),
            *(Column(c, money_label(names.account(c), currency), "money") for c in codes),
            Column("total", money_label(_("Total"), currency), "money"),
        ],
        month=month,
        currency=currency,
    )
    rows = table.rows
    for cc, spent in sorted(by_cc.items(), key=lambda kv: names.centre(kv[0])):
        rows.append({"cost_centre": names.centre(cc), **{c: spent.get(c, ZERO) for c in codes}})
        rows[-1]["total"] = sum(spent.values(), ZERO)
        for code in [c for c in codes if c in spent]:  # a cell without lines leads nowhere
            table.links[(len(rows) - 1, code)] = journal_href(
                month=month, account=code, cost_centre=cc, currency=currency
            )
        table.links[(len(rows) - 1, "total")] = journal_href(
            month=month, cost_centre=cc, expense=True, currency=currency
        )
    if rows:
        rows.append({"cost_centre": _("Total"), **{c: sum((r[c] for r in rows), ZERO) for c in [*codes, "total"]}})
        for code in [c for c in codes if any(c in spent for spent in by_cc.values())]:
            table.links[(len(rows) - 1, code)] = journal_href(month=month, account=code, currency=currency)
        table.links[(len(rows) - 1, "total")] = journal_href(month=month, expense=True, currency=currency)
    fig = go.Figure(
        [
            go.Bar(name=names.account(c), x=[r["cost_centre"] for r in rows[:-1]], y=[float(r[c]) for r in rows[:-1]])
            for c in codes
        ]
    )
    table.figure = figure_html(fig)
    return table


def _by(matrix: list[dict[str, Any]], key: str, month: str) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in matrix:
        if row["month"] == month:
            sums[row[key]] += row["amount"]
    return sums


def _budgets(month: date, currency: str, business_lines: list[str] | None) -> dict[str, Budget]:
    budgets = Budget.objects.filter(month=month, currency__in=[currency, ""])
    if business_lines is not None:
        budgets = budgets.filter(business_line__in=business_lines)
    return {b.business_line: b for b in budgets}


def _tokens(matrix: list[dict[str, Any]], month: str) -> dict[str, int]:
    sums: dict[str, int] = defaultdict(int)
    for row in matrix:
        if row["month"] == month:
            sums[row["cost_centre"]] += row["tokens"]
    return sums


def centres_table(
    *,
    month: date,
    currency: str,
    matrix: list[dict[str, Any]],
    names: Names,
    business_lines: list[str] | None,
    now: datetime | None = None,
) -> Table:
    """Per cost centre: this month, the previous month, the change, the budget, its part due by
    `now` (pro-rated over the month's days gone, apps/plans/variance.py) and the variance
    against that part (actual - budget to date: positive is over, unfavourable for an expense),
    the forecast to the month's end, and tokens against a token budget. The lines with a
    budget have a total of their own: the month's total has no budget (idle capacity and the
    lines without one have none), so its share used would mean nothing."""
    this, before = f"{month:%Y-%m}", f"{previous_month(month):%Y-%m}"
    now_, prev, tokens = _by(matrix, "cost_centre", this), _by(matrix, "cost_centre", before), _tokens(matrix, this)
    budgets = _budgets(month, currency, business_lines)
    progress = month_progress(month=month, now=now or timezone.now())
    table = month_table(
        "budget",
        _("Cost centres against the previous month and the budget, %(month)s (%(currency)s)"),
        [
            Column("cost_centre", _("Cost centre")),
            *_against_previous_columns(currency),
            Column("budget", money_label(_("Budget"), currency), "money"),
            Column("budget_to_date", money_label(_("Budget to date"), currency), "money"),
            Column("variance", money_label(_("Variance to date (actual - budget)"), currency), "money", EXPENSE),
            Column("variance_pct", _("Variance %"), "pct", EXPENSE),
            Column("used", _("Budget used"), "pct"),
            Column("forecast", money_label(_("Forecast, month end"), currency), "money"),
            Column("budget_tokens", _("Token budget"), "int"),
            Column("tokens", _("Tokens"), "int"),
            Column("tokens_used", _("Token budget used"), "pct"),
        ],
        month=month,
        currency=currency,
    )
    rows = table.rows
    for cc in sorted(set(now_) | set(prev) | set(budgets), key=names.centre):
        budget = budgets.get(cc)
        rows.append(
            _centre_row(names.centre(cc), now_.get(cc, ZERO), prev.get(cc), budget, tokens.get(cc, 0), progress)
        )
        table.links[(len(rows) - 1, "actual")] = journal_href(
            month=month, cost_centre=cc, expense=True, currency=currency
        )
        if cc in prev:
            table.links[(len(rows) - 1, "previous")] = journal_href(
                month=previous_month(month), cost_centre=cc, expense=True, currency=currency
            )
    names_ = [r["cost_centre"] for r in rows]
    if rows:
        money_budgets = {cc: b for cc, b in budgets.items() if b.amount is not None}
        if money_budgets:
            total = Budget(amount=sum((b.amount for b in money_budgets.values() if b.amount is not None), ZERO))
            rows.append(
                _centre_row(
                    _("Lines with a budget"),
                    sum((now_.get(cc, ZERO) for cc in money_budgets), ZERO),
                    sum((prev[cc] for cc in money_budgets if cc in prev), ZERO) if prev else None,
                    total,
                    sum(tokens.get(cc, 0) for cc in money_budgets),
                    progress,
                )
            )
        rows.append(
            _centre_row(
                _("Total"),
                sum(now_.values(), ZERO),
                sum(prev.values(), ZERO) if prev else None,
                None,
                sum(tokens.values()),
                progress,
            )
        )
    fig = go.Figure(
        [
            go.Bar(name=_("Budget"), x=names_, y=[float(r["budget"] or 0) for r in rows[: len(names_)]]),
            go.Bar(name=_("This month"), x=names_, y=[float(r["actual"]) for r in rows[: len(names_)]]),
        ]
    )
    table.figure = figure_html(fig, "group")
    return table


def _centre_row(
    label: str, actual: Decimal, previous: Decimal | None, budget: Budget | None, tokens: int, progress: MonthProgress
) -> dict[str, Any]:
    amount = budget.amount if budget is not None else None
    to_date = pro_rated(amount, progress)
    off = variance(actual, to_date)
    budget_tokens = budget.tokens if budget is not None else None
    return {
        "cost_centre": label,
        **_against_previous(actual, previous),
        "budget": amount,
        "budget_to_date": to_date,
        "variance": off.amount if off is not None else None,
        "variance_pct": off.share.quantize(Decimal("0.0001")) if off is not None and off.share is not None else None,
        "used": (actual / amount).quantize(Decimal("0.0001")) if amount else None,
        "forecast": forecast(actual, progress),
        "budget_tokens": budget_tokens,
        "tokens": tokens,
        "tokens_used": (Decimal(tokens) / budget_tokens).quantize(Decimal("0.0001")) if budget_tokens else None,
    }


def accounts_table(
    *, month: date, currency: str, matrix: list[dict[str, Any]], accounts: list[Account], names: Names
) -> Table:
    """Per expense account: this month, the previous month and the change."""
    this, before = f"{month:%Y-%m}", f"{previous_month(month):%Y-%m}"
    now, prev = _by(matrix, "account", this), _by(matrix, "account", before)
    table = month_table(
        "accounts",
        _("Accounts against the previous month, %(month)s (%(currency)s)"),
        [
            Column("account", _("Account")),
            *_against_previous_columns(currency),
        ],
        month=month,
        currency=currency,
    )
    rows = table.rows
    for account in accounts:
        if account.code not in now and account.code not in prev:
            continue
        rows.append(
            {
                "account": names.account(account.code),
                **_against_previous(now.get(account.code, ZERO), prev.get(account.code, ZERO)),
            }
        )
        table.links[(len(rows) - 1, "actual")] = journal_href(month=month, account=account.code, currency=currency)
        table.links[(len(rows) - 1, "previous")] = journal_href(
            month=previous_month(month), account=account.code, currency=currency
        )
    if rows:
        rows.append({"account": _("Total"), **_against_previous(sum(now.values(), ZERO), sum(prev.values(), ZERO))})
    return table


def trial_balance_table(*, month: date, currency: str, names: Names, business_lines: list[str] | None) -> Table:
    """The month's trial balance in one currency (only the user's cost centres when scoped)."""
    balance = trial_balance(month=month, business_lines=business_lines)
    book = next((b for b in balance["currencies"] if b["currency"] == currency), None)
    kinds = {"expense": _("expense"), "liability": _("liability")}
    table = month_table(
        "trial_balance",
        _("Trial balance, %(month)s (%(currency)s)"),
        [
            Column("account", _("Account")),
            Column("kind", _("Kind")),
            Column("debits", money_label(_("Debits"), currency), "money"),
            Column("credits", money_label(_("Credits"), currency), "money"),
            Column("balance", money_label(_("Balance"), currency), "money"),
            Column("originals", _("Priced in another currency")),
        ],
        month=month,
        currency=currency,
    )
    rows = table.rows
    for account in book["accounts"] if book else []:
        rows.append(
            {
                "account": names.account(account["code"]),
                "kind": kinds.get(account["kind"], account["kind"]),
                "debits": account["debits"],
                "credits": account["credits"],
                "balance": account["balance"],
                "originals": originals_text(account["originals"]),
            }
        )
        table.links[(len(rows) - 1, "balance")] = journal_href(month=month, account=account["code"], currency=currency)
    if book:
        rows.append(
            {
                "account": _("Total"),
                "kind": _("balanced") if book["balanced"] else _("NOT balanced"),
                "debits": book["debits"],
                "credits": book["credits"],
                "balance": book["debits"] - book["credits"],
                "originals": "",
            }
        )
    return table


def originals_text(originals: dict[str, Decimal]) -> str:
    """'12.34 USD' per currency, the amounts as priced rounded to the cent."""
    return ", ".join(f"{amount.quantize(Decimal('0.01'))} {code}" for code, amount in sorted(originals.items()))


def trend_table(*, trend: list[dict[str, Any]], names: Names, currency: str) -> Table:
    months = sorted({r["month"] for r in trend})
    codes = sorted({r["account"] for r in trend})
    amounts = {(r["month"], r["account"]): r["amount"] for r in trend}
    rows = [{"month": m, **{a: amounts.get((m, a), ZERO) for a in codes}} for m in months]
    fig = go.Figure(
        [
            go.Bar(name=names.account(a), x=month_axis(months), y=[float(amounts.get((m, a), 0)) for m in months])
            for a in codes
        ]
    )
    table = Table(
        "trend",
        _("Spend by account, last %(months)d months (%(currency)s)") % {"months": TREND_MONTHS, "currency": currency},
        [Column("month", _("Month")), *(Column(a, money_label(names.account(a), currency), "money") for a in codes)],
        rows,
        figure_html(fig, period="month"),
        currency=currency,
    )
    for i, m in enumerate(months):
        month = date(int(m[:4]), int(m[5:]), 1)
        for code in codes:
            table.links[(i, code)] = journal_href(month=month, account=code, currency=currency)
    return table


def periods_table() -> Table:
    states = {"open": _("open"), "closed": _("closed")}
    rows = [{**p, "status": states.get(p["status"], p["status"])} for p in periods_status(months=TREND_MONTHS)]
    return Table(
        "periods",
        _("Periods"),
        [
            Column("month", _("Month")),
            Column("status", _("Status")),
            Column("closed_at", _("Closed at"), "datetime"),
            Column("closed_by", _("Closed by")),
            Column("days_booked", _("Days booked"), "int"),
            Column("booked_through", _("Booked through"), "date"),
            Column("adjustments_posted", _("Adjusting entries"), "int"),
        ],
        rows,
    )


def findings_table(*, month: date, names: Names, business_lines: list[str] | None) -> Table:
    findings = Finding.objects.filter(period=month)
    if business_lines is not None:
        findings = findings.filter(business_line__in=business_lines)
    rows = [
        {**f, "business_line": names.centre(f["business_line"]) if f["business_line"] else _("whole company")}
        for f in findings.values("kind", "business_line", "action", "message", "delivered_at")
    ]
    return Table(
        "findings",
        _("Month-end findings, %(month)s") % {"month": f"{month:%Y-%m}"},
        [
            Column("kind", _("Finding")),
            Column("business_line", _("Cost centre")),
            Column("action", _("Action")),
            Column("message", _("Message")),
            Column("delivered_at", _("Delivered at"), "datetime"),
        ],
        rows,
    )
