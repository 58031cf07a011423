"""One figure everywhere: the headline figures each page marks (`data-figure`, `data-value`) are the
same for the same window, lines and currency on the overview, the finance page, the budgets page
and the ledger's APIs, and equal to the journal once it is booked (docs/dashboards.md, "Figures").

Books: `manage.py demo_data` (last month closed, this one in progress, pools with idle capacity),
then hours priced after the last accrual, which every page must count alike before the journal does."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client

from apps.common.buckets import day_start, month_days, next_month
from apps.ledger.models import Account, JournalLine
from apps.ledger.services.accrual import recent_accrue
from apps.plans.models import Budget
from apps.pricing.services import hours_price
from tests.conftest import login_as
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


@pytest.fixture
def books(db: None, settings: Any) -> Iterator[None]:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    with time_machine.travel(NOW, tick=True):
        call_command("demo_data", "--records", "3000", stdout=io.StringIO())
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


# --- books of their own: three business lines and tokens of none, a CNY price book, a USD one with
# a day that has no rate, a pool with idle hours; a month booked, then hours priced after it -------

OCT_ = date(2026, 10, 1)
LINES = ("support", "search", "legal")


@pytest.fixture
def own_books(collector: Any, settings: Any) -> None:
    settings.ACCOUNTING_TZ = "UTC"
    import random

    from apps.currencies.rates import rate_set
    from apps.ledger.services.accrual import month_accrue
    from apps.pricing.services import price_set
    from tests import factories

    pick = random.Random(30)
    sent = []
    for day in range(1, 11):
        for hour in pick.sample(range(24), 6):
            at = datetime(2026, 10, day, hour, pick.randrange(60), tzinfo=UTC)
            line = pick.choice([*LINES, ""])
            sent.append(
                record(
                    ts=at.isoformat(),
                    model=pick.choice(["qwen2.5-7b-instruct", "gpt-4o", "deepseek-v3"]),
                    dims={"business_line": line} if line else {"feature": "batch"},
                    prompt_hash=None,
                    **{"tokens.prompt": pick.randrange(800, 4000), "tokens.completion": pick.randrange(10, 900)},
                )
            )
    response = collector.send(sent, on_time=True)
    assert response.status_code == 200 and response.json()["accepted"] == len(sent), response.content
    since = datetime(2026, 9, 1, tzinfo=UTC)
    price_set(
        model_pattern="gpt-4o*",
        prices={"input": Decimal("2.5"), "cached_input": Decimal("1.25"), "output": Decimal("10")},
        effective_from=since,
        currency="USD",
    )
    price_set(
        model_pattern="deepseek-*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=since,
    )
    factories.cost_pool(model_patterns=["qwen2.5-*"], effective_from=since, capacity=50_000)
    for day in range(1, 11):
        if day != 7:  # the 7th has no USD rate: its gpt-4o cost waits for one
            rate_set(day=date(2026, 10, day), currency="USD", rate=f"7.{day}", source="test")
    with time_machine.travel(datetime(2026, 10, 11, 0, 30, tzinfo=UTC), tick=True):
        hours_price(start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 10, 8, tzinfo=UTC))
        month_accrue(month=OCT_)  # the 1st to the 7th booked
        hours_price(start=datetime(2026, 10, 8, tzinfo=UTC), end=datetime(2026, 10, 11, tzinfo=UTC))  # not booked


def figures_of(client: Client, line: str = "") -> dict[str, Decimal]:
    pages = {
        "overview": overview(client, OCT_, line),
        "finance": get(client, f"/finance/?month={OCT_:%Y-%m}"),
    }
    return {name: one(page, "spend") for name, page in pages.items()}


@pytest.mark.django_db
def test_books_of_their_own_are_one_figure_before_and_after_the_journal_books_them(own_books: None) -> None:
    from apps.ledger.services.accrual import month_accrue
    from apps.pricing.models import HourlyCost, PoolIdleHour

    admin = login_as("admin")
    before = figures_of(admin)
    assert len(set(before.values())) == 1, before
    # An independent reference: the priced rows and idle hours, each converted at its day's rate.
    rates = {day: Decimal(f"7.{day}") for day in range(1, 11) if day != 7}
    reference = Decimal(0)
    for row in HourlyCost.objects.filter(hour__gte=datetime(2026, 10, 1, tzinfo=UTC)):
        if row.currency == "CNY":
            reference += row.cost
        elif row.hour.day in rates:
            reference += row.cost * rates[row.hour.day]
    reference += sum((h.idle for h in PoolIdleHour.objects.all()), Decimal(0))
    # The journal rounds per line and day; the pending days round once: a few fen at most.
    assert abs(before["overview"] - reference) <= Decimal("0.50"), (before, reference)
    overview_page = overview(admin, OCT_)
    assert "waits for an exchange rate" in overview_page  # the 7th's gpt-4o cost, not in the total
    assert expense_posted(admin, OCT_) < before["finance"]  # the 8th to the 10th are not booked yet

    with time_machine.travel(datetime(2026, 10, 11, 0, 40, tzinfo=UTC), tick=True):
        month_accrue(month=OCT_)
    after = figures_of(admin)
    assert len(set(after.values())) == 1 and after["finance"] == expense_posted(admin, OCT_), after
    assert abs(after["finance"] - before["finance"]) <= Decimal("0.05")  # the same money, now rounded by day

    for line in LINES:
        scoped = login_as("finance", lines=[line], money=True)
        seen = {**figures_of(scoped), "overview of the line": one(overview(admin, OCT_, line), "spend")}
        seen["trial balance"] = expense_posted(scoped, OCT_)
        assert len(set(seen.values())) == 1, (line, seen)
