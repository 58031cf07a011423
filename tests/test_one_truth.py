"""One figure everywhere: the headline figures each page marks (`data-figure`, `data-value`) are the
same for the same window, lines and currency on the overview, the finance page, the budgets page
and the ledger's APIs, and equal to the journal once it is booked (docs/dashboards.md, "Figures").

Books: `manage.py demo_data` (last month closed, this one in progress, pools with idle capacity),
then hours priced after the last accrual, which every page must count alike before the journal does."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest
import time_machine
from django.test import Client

from apps.common.buckets import day_start, month_days, next_month
from apps.ledger.models import Account, JournalLine
from apps.ledger.services.accrual import recent_accrue
from apps.plans.models import Budget
from apps.pricing.services import hours_price
from tests.conftest import demo_books_shared, login_as
from tests.factories import record

pytestmark = pytest.mark.books_in("Asia/Shanghai")  # as make demo-data keeps them

NOW = datetime(2026, 11, 18, 4, 5, tzinfo=UTC)  # mid-month: 12:05 in Shanghai
CLOSED, OPEN = date(2026, 10, 1), date(2026, 11, 1)
TAG = re.compile(r"<[^>]*\bdata-figure=[^>]*>")
ATTR = re.compile(r'\bdata-(figure|value|currency|scope)="([^"]*)"')


def marked(page: str) -> list[dict[str, str]]:
    """Every figure a page marks: name, value, currency and scope."""
    return [{k: html.unescape(v) for k, v in ATTR.findall(tag)} for tag in TAG.findall(page)]


def one(page: str, name: str, scope: str = "") -> Decimal:
    found = [f for f in marked(page) if f["figure"] == name and f.get("scope", "") == scope]
    assert len(found) == 1, f"{name}/{scope or '-'}: {found} among {marked(page)}"
    return Decimal(found[0]["value"])


def get(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def overview(client: Client, month: date, line: str = "") -> str:
    last = next_month(month) - timedelta(days=1)
    query = f"from={month:%Y-%m-%d}&to={last:%Y-%m-%d}" + (f"&dims.business_line={line}" if line else "")
    return get(client, f"/overview/?{query}")


def expense_posted(client: Client, month: date) -> Decimal:
    """The trial balance API's expense accounts, net, in the books' currency."""
    found = client.get(f"/api/v1/ledger/trial-balance?period={month:%Y-%m}").json()
    book = next(c for c in found["currencies"] if c["currency"] == "CNY")
    return sum((Decimal(a["balance"]) for a in book["accounts"] if a["kind"] == Account.Kind.EXPENSE), Decimal(0))


@pytest.fixture(scope="module")
def demo_books(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with demo_books_shared(django_db_blocker, NOW):
        yield


@pytest.fixture
def books(demo_books: None, db: None) -> Iterator[None]:
    with time_machine.travel(NOW, tick=True):
        yield


def test_the_month_is_one_figure_on_every_page(books: None) -> None:
    admin = login_as("admin")
    for month in (CLOSED, OPEN):
        seen = {
            "overview": overview(admin, month),
            "finance": get(admin, f"/finance/?month={month:%Y-%m}"),
            "budgets": get(admin, f"/budgets/?month={month:%Y-%m}"),
        }
        # The budgets page marks its whole month as the scope "all" (its rows are the lines).
        spend = {page: one(found, "spend", "all" if page == "budgets" else "") for page, found in seen.items()}
        tokens = {page: one(found, "tokens", "all" if page == "budgets" else "") for page, found in seen.items()}
        api = admin.get(f"/api/v1/ledger/figures?period={month:%Y-%m}").json()
        spend["api"], tokens["api"] = Decimal(api["spend"]["total"]), api["tokens"]["total"]
        assert len(set(spend.values())) == 1, (month, spend)
        assert len(set(tokens.values())) == 1, (month, tokens)
        total = spend["overview"]
        assert total > 0 and tokens["overview"] > 0
        # The journal holds it all (demo_data accrues): the trial balance says the same.
        assert expense_posted(admin, month) == total, month
        for page in ("overview", "finance"):
            usage, idle = one(seen[page], "spend", "usage"), one(seen[page], "spend", "idle")
            assert usage + idle == total and idle > 0, (page, usage, idle, total)
        idle = {page: one(found, "spend", "idle") for page, found in seen.items()}
        assert len(set(idle.values())) == 1, (month, idle)


def test_a_business_line_is_one_figure_on_every_page(books: None) -> None:
    """The overview of one line, the finance page and the trial balance of a user scoped to it, and
    the budgets page's row of it agree; the lines and idle capacity add up to the whole."""
    admin = login_as("admin")
    lines = sorted(set(Budget.objects.filter(month=CLOSED).values_list("business_line", flat=True)))
    assert len(lines) >= 3
    budgets = get(admin, f"/budgets/?month={CLOSED:%Y-%m}")
    whole = one(overview(admin, CLOSED), "spend")
    summed = Decimal(0)
    for line in lines:
        scoped = login_as("finance", lines=[line], money=True)
        figures = {
            "overview": one(overview(admin, CLOSED, line), "spend"),
            "overview, scoped": one(overview(scoped, CLOSED), "spend"),
            "finance, scoped": one(get(scoped, f"/finance/?month={CLOSED:%Y-%m}"), "spend"),
            "budgets": one(budgets, "spend", line),
            "trial balance, scoped": expense_posted(scoped, CLOSED),
        }
        assert len(set(figures.values())) == 1, (line, figures)
        summed += figures["overview"]
    idle = one(overview(admin, CLOSED), "spend", "idle")
    unassigned = sum(
        (
            j.debit - j.credit
            for j in JournalLine.objects.filter(period_id=CLOSED, cost_centre="unassigned", model__isnull=False)
        ),
        Decimal(0),
    )
    assert summed + idle + unassigned == whole


def test_hours_priced_since_the_accrual_count_alike_before_the_journal_books_them(books: None, collector: Any) -> None:
    admin = login_as("admin")
    before = one(get(admin, f"/finance/?month={OPEN:%Y-%m}"), "spend")
    # Two hours of today, ended, priced after the last accrual.
    hour = NOW.replace(minute=0) - timedelta(hours=2)
    fresh = [
        record(
            ts=(hour + timedelta(hours=h, minutes=10)).isoformat(),
            model="deepseek-chat",  # a price book's model: a pool's tokens move its idle part, not its total
            dims={"business_line": "search"},
        )
        for h in range(2)
        for _ in range(5)
    ]
    response = collector.send(fresh)
    assert response.status_code == 200 and response.json()["accepted"] == len(fresh), response.content
    hours_price(start=hour, end=hour + timedelta(hours=2))

    pages = {
        "overview": one(overview(admin, OPEN), "spend"),
        "finance": one(get(admin, f"/finance/?month={OPEN:%Y-%m}"), "spend"),
    }
    assert len(set(pages.values())) == 1, pages
    assert pages["finance"] > before
    posted = expense_posted(admin, OPEN)
    assert posted == before < pages["finance"]  # the journal has not booked them yet

    recent_accrue()
    assert expense_posted(admin, OPEN) == one(get(admin, f"/finance/?month={OPEN:%Y-%m}"), "spend")
    assert one(overview(admin, OPEN), "spend") == pages["overview"]


def test_a_window_that_cuts_days_counts_their_hours(books: None) -> None:
    """A window of hours (an alert's) holds exactly its hours: the day before it and the day after it
    add up to the whole month with it."""
    admin = login_as("admin")
    days = month_days(CLOSED)
    cut = day_start(days[10]) + timedelta(hours=7)
    parts = [
        (day_start(days[0]), cut),
        (cut, cut + timedelta(hours=30)),
        (cut + timedelta(hours=30), day_start(next_month(CLOSED))),
    ]
    found = [
        one(get(admin, "/overview/?" + urlencode({"from": a.isoformat(), "to": b.isoformat()})), "spend")
        for a, b in parts
    ]
    whole = one(overview(admin, CLOSED), "spend")
    # The journal rounds each booked day; the cut days are priced exactly and rounded once each,
    # so the parts may differ from the whole by a fen per part.
    assert abs(sum(found, Decimal(0)) - whole) <= Decimal("0.03"), (found, whole)
    assert all(f > 0 for f in found)
