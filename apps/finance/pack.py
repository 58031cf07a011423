"""The month pack: one workbook per closed month, as finance files it. Each sheet is a Table
built by one function here: the cover, the checklist as approved, the trial balance, spend by
account and cost centre, budget vs actual, the month-end findings and the waste summary.
`month_pack_tables` lists them in that order; `apps.common.sheets.workbook_xlsx` writes them.
Each finding carries who resolved or accepted it, when and why (apps/ledger/services/closing.py),
in the findings sheet and under the checklist's findings line.

For a user scoped to some business lines every sheet holds their cost centres only (each
entry balances per cost centre, so their trial balance balances too); company-wide findings
and the checklist, which speak of every line, are left out for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from apps.common.tables import Column, Table
from apps.finance.waste import waste_tables
from apps.ledger.finding_text import finding_text_of
from apps.ledger.idle.allocation import policy_in_force, policy_label
from apps.ledger.models import CloseRequest, CostCentre, Finding, FindingReview, Period, PeriodEvent
from apps.ledger.names import SEEDED_NAMES, names_load
from apps.ledger.selectors import ledger_matrix, trial_balance
from apps.ledger.services.closing import detail_shown
from apps.plans.selectors import budget_vs_actual

CENT = Decimal("0.01")


class PackError(Exception):
    """The month has no pack (it is not closed)."""


def cost_centre_names() -> dict[str, tuple[str, str]]:
    """Business line key -> (cost-centre code, name), as finance set them."""
    return {c.business_line: (c.code, c.name) for c in CostCentre.objects.all()}


def _centre(key: str, names: dict[str, tuple[str, str]]) -> dict[str, str]:
    code, name = names.get(key, ("", ""))
    return {"cost_centre_code": code, "cost_centre": name or key or _("(company)")}


def _centre_columns() -> list[Column]:
    return [Column("cost_centre_code", _("Cost centre code")), Column("cost_centre", _("Cost centre"))]


def _closed_period(month: date) -> Period:
    period = Period.objects.select_related("closed_by").filter(month=month).first()
    if period is None or period.status != Period.Status.CLOSED:
        raise PackError(
            _("%(month)s is not closed: the month pack is made for closed months.") % {"month": f"{month:%Y-%m}"}
        )
    return period


def approved_request(*, month: date) -> CloseRequest | None:
    """The approval behind the month's current close: the latest approved request, unless the
    month was reopened after it (then its close had no approval)."""
    request = (
        CloseRequest.objects.select_related("prepared_by", "decided_by")
        .filter(month=month, state=CloseRequest.State.APPROVED)
        .order_by("-decided_at", "-id")
        .first()
    )
    if request is None or request.decided_at is None:
        return request
    reopened = PeriodEvent.objects.filter(
        period__month=month, action=PeriodEvent.Action.REOPEN, at__gt=request.decided_at
    ).exists()
    return None if reopened else request


def _local(at: datetime | None, zone: str) -> str:
    return f"{at.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} ({zone})" if at else ""


def _user(user: Any) -> str:
    return user.get_username() if user is not None else ""


def _expense(book: dict[str, Any]) -> Decimal:
    return sum((a["balance"] for a in book["accounts"] if a["kind"] == "expense"), Decimal(0))


def _one(currencies: list[str]) -> str:
    return currencies[0] if len(currencies) == 1 else ""


def _yes_no(flag: Any) -> str:
    return pgettext("answer", "yes") if flag else pgettext("answer", "no")


def _month_table(
    *,
    name: str,
    title: str,
    columns: list[Column],
    rows: list[dict[str, Any]],
    month: date,
    currencies: Sequence[str] = (),
) -> Table:
    """A sheet of the month: its period, and its currency where it holds only one."""
    return Table(
        name=name, title=title, columns=columns, rows=rows, currency=_one(list(currencies)), period=f"{month:%Y-%m}"
    )


def cover_table(*, month: date, business_lines: list[str] | None = None) -> Table:
    """Month, zone, currency, who closed it and when, who prepared and approved the close."""
    period = _closed_period(month)
    request = approved_request(month=month)
    books = trial_balance(month=month, business_lines=business_lines)["currencies"]
    currencies = [book["currency"] for book in books]
    expense = ", ".join(f"{_expense(book):,.2f} {book['currency']}" for book in books)
    findings = Finding.objects.filter(period=month)
    if business_lines is not None:
        findings = findings.filter(business_line__in=business_lines)
    items = [
        (_("Month"), f"{month:%Y-%m}"),
        (_("Accounting time zone"), period.tz),
        (_("Currency"), ", ".join(currencies) or _("(nothing booked)")),
        (_("Closed at"), _local(period.closed_at, period.tz)),
        (_("Closed by"), _user(period.closed_by) or _("(the system)")),
        (_("Prepared by"), _user(request.prepared_by) if request else ""),
        (_("Approved by"), _user(request.decided_by) if request else _("(closed without an approved request)")),
        (_("Approved at"), _local(request.decided_at, period.tz) if request else ""),
        (_("Business lines"), ", ".join(business_lines) if business_lines is not None else _("all")),
        (_("Expense posted"), expense),
        (_("Month-end findings"), str(findings.count())),
        (_("Idle policy"), policy_label(policy_in_force(month))),
    ]
    return _month_table(
        name="cover",
        title=_("Month pack %(month)s") % {"month": f"{month:%Y-%m}"},
        columns=[Column("item", _("Item")), Column("value", _("Value"))],
        rows=[{"item": item, "value": value} for item, value in items],
        month=month,
        currencies=currencies,
    )


def checklist_table(*, month: date) -> Table:
    """The checklist as the approved close request stored it, or a row saying there was none;
    under the findings line, who resolved or accepted each finding."""
    request = approved_request(month=month)
    zone = _closed_period(month).tz
    columns = [
        Column("label", _("Check")),
        Column("value", _("Value")),
        Column("ok", _("OK")),
        Column("detail", _("Detail")),
    ]
    if request is None:
        rows = [
            {
                "label": _("This month was closed without an approved close request."),
                "value": "",
                "ok": "",
                "detail": "",
            }
        ]
    else:
        rows = []
        for item in request.checklist:
            rows.append(
                {
                    "label": _(str(item.get("label", item.get("key", "")))),
                    "value": item.get("value", ""),
                    "ok": _yes_no(item.get("ok")),
                    "detail": detail_shown(item),
                }
            )
            rows += [_review_row(review, zone=zone) for review in item.get("reviews", [])]
    return _month_table(name="checklist", title=_("Checklist as approved"), columns=columns, rows=rows, month=month)


def _review_row(review: dict[str, Any], *, zone: str) -> dict[str, Any]:
    """A finding's review under the checklist's findings line, as the request stored it."""
    line = review.get("business_line") or _("the company")
    return {
        "label": f"  {_(str(review.get('label', '')))}: {line}",
        "value": pgettext("finding", str(review.get("decision", ""))),
        "ok": "",
        "detail": _("%(who)s, %(at)s: %(note)s")
        % {
            "who": review.get("by", ""),
            "at": _local(datetime.fromisoformat(review["at"]), zone) if review.get("at") else "",
            "note": review.get("note", ""),
        },
    }


def trial_balance_table(*, month: date, business_lines: list[str] | None = None) -> Table:
    """Per currency each account's debits, credits and balance, then the currency's totals."""
    rows: list[dict[str, Any]] = []
    books = trial_balance(month=month, business_lines=business_lines)["currencies"]
    for book in books:
        for account in book["accounts"]:
            rows.append({"currency": book["currency"], **account, "name": _account(account["name"]), "balanced": ""})
        rows.append(
            {
                "currency": book["currency"],
                "code": "",
                "name": _("Total"),
                "debits": book["debits"],
                "credits": book["credits"],
                "balance": book["debits"] - book["credits"],
                "balanced": _yes_no(book["balanced"]),
            }
        )
    columns = [
        Column("currency", _("Currency")),
        Column("code", _("Account code")),
        Column("name", _("Account")),
        Column("debits", _("Debits"), "money"),
        Column("credits", _("Credits"), "money"),
        Column("balance", _("Balance"), "money"),
        Column("balanced", _("Balanced")),
    ]
    return _month_table(
        name="trial-balance",
        title=_("Trial balance"),
        columns=columns,
        rows=rows,
        month=month,
        currencies=[b["currency"] for b in books],
    )


def spend_table(*, month: date, business_lines: list[str] | None = None) -> Table:
    """Net expense and tokens per account and cost centre posted in the month."""
    names = cost_centre_names()
    found = ledger_matrix(start=month, end=month, business_lines=business_lines)
    rows = [
        {
            "account": r["account"],
            "account_name": _account(r["account_name"]),
            **_centre(r["cost_centre"], names),
            "currency": r["currency"],
            "amount": r["amount"],
            "tokens": r["tokens"],
        }
        for r in found
    ]
    columns = [
        Column("account", _("Account code")),
        Column("account_name", _("Account")),
        *_centre_columns(),
        Column("currency", _("Currency")),
        Column("amount", _("Amount"), "money"),
        Column("tokens", _("Tokens"), "int"),
    ]
    return _month_table(
        name="spend",
        title=_("Spend by account & cost centre"),
        columns=columns,
        rows=rows,
        month=month,
        currencies=sorted({r["currency"] for r in found}),
    )


def budget_table(*, month: date, business_lines: list[str] | None = None) -> Table:
    """Budget vs actual per cost centre: money and tokens, with the share used."""
    names = cost_centre_names()
    found = budget_vs_actual(month=month, business_lines=business_lines)
    rows = [{**r, **_centre(r["business_line"], names)} for r in found]
    columns = [
        *_centre_columns(),
        Column("currency", _("Currency")),
        Column("budget_amount", _("Budget"), "money"),
        Column("actual_amount", _("Actual"), "money"),
        Column("amount_used", _("Budget used"), "pct"),
        Column("budget_tokens", _("Budget tokens"), "int"),
        # Two token figures (docs/budgets.md): what a token budget counts, and what the ledger booked.
        Column("used_tokens", _("Tokens used"), "int"),
        Column("tokens_used", _("Token budget used"), "pct"),
        Column("actual_tokens", _("Tokens booked"), "int"),
    ]
    return _month_table(
        name="budget",
        title=_("Budget vs actual"),
        columns=columns,
        rows=rows,
        month=month,
        currencies=sorted({r["currency"] for r in found if r["currency"]}),
    )


def findings_table(*, month: date, business_lines: list[str] | None = None) -> Table:
    """The month-end checks' findings stored at close, each with who resolved or accepted it."""
    names = cost_centre_names()
    zone = _closed_period(month).tz
    found = Finding.objects.filter(period=month).order_by("kind", "business_line")
    if business_lines is not None:
        found = found.filter(business_line__in=business_lines)
    reviews = {
        (r.kind, r.business_line): r for r in FindingReview.objects.filter(period=month).select_related("reviewed_by")
    }
    rows = [
        {"kind": f.kind, **_centre(f.business_line, names), "action": f.action, "message": finding_text_of(f)}
        | _review_cells(reviews.get((f.kind, f.business_line)), zone)
        for f in found
    ]
    columns = [
        Column("kind", _("Finding")),
        *_centre_columns(),
        Column("action", _("Action")),
        Column("message", _("Message")),
        Column("decision", _("Decision")),
        Column("reviewed_by", _("Decided by")),
        Column("reviewed_at", _("Decided at")),
        Column("reason", _("Reason")),
    ]
    return _month_table(name="findings", title=_("Month-end findings"), columns=columns, rows=rows, month=month)


def _account(name: str) -> str:
    """A seeded account's name in the reader's language (one finance named stays as named)."""
    return _(name) if name in SEEDED_NAMES else name


def _review_cells(review: FindingReview | None, zone: str) -> dict[str, str]:
    if review is None:
        empty = {"reviewed_by": "", "reviewed_at": "", "reason": ""}
        return {"decision": _("open: neither resolved nor accepted"), **empty}
    return {
        "decision": pgettext("finding", review.decision),
        "reviewed_by": _user(review.reviewed_by),
        "reviewed_at": _local(review.reviewed_at, zone),
        "reason": review.note,
    }


def waste_summary_tables(*, month: date, business_lines: list[str] | None = None) -> list[Table]:
    """The finance page's waste tables of the month, in each currency it was booked in: waste
    per cost centre reconciled to /waste/, and per cost centre and reason with the part inside
    elastic windows (booked to another account, still waste)."""
    currencies = sorted({book["currency"] for book in trial_balance(month=month)["currencies"]}) or ["CNY"]
    names = names_load()
    found = []
    for currency in currencies:
        reconciled, reasons = waste_tables(month=month, currency=currency, names=names, business_lines=business_lines)
        suffix = f" {currency}" if len(currencies) > 1 else ""
        found += [
            replace(reconciled, title=_("Waste reconciled") + suffix),
            replace(reasons, title=_("Waste by reason") + suffix),
        ]
    return found


def month_pack_tables(*, month: date, business_lines: list[str] | None = None) -> list[Table]:
    """The pack's sheets in order; PackError unless the month is closed."""
    lines = business_lines
    tables = [cover_table(month=month, business_lines=lines)]
    if lines is None:
        tables.append(checklist_table(month=month))
    return [
        *tables,
        trial_balance_table(month=month, business_lines=lines),
        spend_table(month=month, business_lines=lines),
        budget_table(month=month, business_lines=lines),
        findings_table(month=month, business_lines=lines),
        *waste_summary_tables(month=month, business_lines=lines),
    ]


def month_pack_path(month: date) -> str:
    return f"/finance/pack/{month:%Y-%m}.xlsx"
