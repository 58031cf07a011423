"""Where a finance number leads: its journal lines, and from a journal line the usage it was
booked from (the waste drill-down of that day, line and model), the bill behind an adjustment.

Those pages belong to the apps above the books (the finance reader, the dashboards, the plans,
the reconciliation), which the books may not name: each registers its page here under a name the
books give it (`PAGES`), from its AppConfig.ready(), `page_link_register("journal", builder)`.
A link to a page no app registered is "" (a page shows no link then; apps.common.links)."""

from __future__ import annotations

from datetime import date
from urllib.parse import urlencode

from apps.common.buckets import month_days
from apps.common.links import PageLinks
from apps.ledger import conf
from apps.ledger.models import Account, JournalEntry, JournalLine

# The pages the books link to, by what they show: the finance page of a month, the journal, the
# usage behind a cost (filtered by day, line, model, reason, class), a month's plans (month=
# "YYYY-MM"), the supplier bills of a month and the closed month's pack (month="YYYY-MM").
PAGES = PageLinks("the books", ("finance", "journal", "usage", "plans", "bills", "month pack"))
page_link_register = PAGES.register
page_link = PAGES.link


def _with_query(page: str, query: dict[str, str]) -> str:
    return f"{page}?{urlencode(query)}" if page else ""


# The token class an account books, for the /waste/ link of its lines (elastic and idle: any).
ROLE_CLASS = {
    Account.Role.EFFECTIVE: "effective",
    Account.Role.STRUCTURAL: "effective",
    Account.Role.WASTE: "waste",
    Account.Role.SHADOW: "shadow",
}


def journal_href(
    *, month: date, account: str = "", cost_centre: str = "", expense: bool = False, currency: str = ""
) -> str:
    query = {"month": f"{month:%Y-%m}"}
    for name, value in (("account", account), ("cost_centre", cost_centre), ("currency", currency)):
        if value:
            query[name] = value
    if expense:
        query["side"] = "expense"
    return _with_query(page_link("journal"), query)


def waste_href(*, first: date, last: date, business_line: str, **more: str) -> str:
    """The usage page for the days [first, last] of one business line (the unassigned cost centre is
    usage without a line, which the page cannot filter to: all lines then)."""
    query = {"from": f"{first:%Y-%m-%d}", "to": f"{last:%Y-%m-%d}"}
    if business_line and business_line != conf.get("LEDGER_UNASSIGNED"):
        query["dims.business_line"] = business_line
    query.update({k: v for k, v in more.items() if v})
    return _with_query(page_link("usage"), query)


def month_waste_href(*, month: date, business_line: str, **more: str) -> str:
    days = month_days(month)
    return waste_href(first=days[0], last=days[-1], business_line=business_line, **more)


def bill_href(*, entry: JournalEntry) -> str:
    """The supplier bill behind a bill adjustment's entry: its adjustment on the reconciliation
    page of the bill's month (which links back to the entry)."""
    basis = entry.basis or {}
    if entry.kind != JournalEntry.Kind.BILL or "bill_adjustment" not in basis:
        return ""
    page = _with_query(page_link("bills"), {"month": basis["month"]})
    return f"{page}#adjustment-{basis['bill_adjustment']}" if page else ""


def usage_href(*, line: JournalLine) -> str:
    """The usage behind an expense line: the usage page filtered to its day, line and model, at the
    reason when the line holds one reason only (then the breakdown leads to the requests)."""
    if line.model_id is None or line.account.kind != Account.Kind.EXPENSE:
        return ""
    reasons = sorted(line.basis.get("reasons", {}))
    more = {"model": line.model.name}
    if len(reasons) == 1:
        more["reason"] = reasons[0]
    elif line.account.role in ROLE_CLASS:
        more["class"] = ROLE_CLASS[Account.Role(line.account.role)]
    return waste_href(first=line.day, last=line.day, business_line=line.cost_centre, **more)
