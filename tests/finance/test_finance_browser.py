"""The finance pages in a real browser (Playwright + Debian's chromium, as in
tests/dashboards/test_browser.py): the month's question answered from the home page in a few
clicks with the figures of the trial balance and matrix APIs, a click path from a ledger cell
to one record, a scoped user's lines only, and the Chinese page. Screenshots go to
test-artifacts/ (finance.png, finance-journal.png, finance-drill-usage.png, finance-zh-hans.png)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from apps.common.buckets import month_of
from apps.common.formats import money_text
from apps.ledger.models import CostCentre
from apps.ledger.services.accrual import month_accrue
from apps.plans.models import Budget
from tests.conftest import T0, month_like_records, priced
from tests.dashboards.test_browser import browser, person, shot, sign_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
__all__ = ["browser"]  # the fixture, shared
MONTH = month_of(T0)


@pytest.fixture
def books(live_server: Any, truncate_records: None, collector: Any) -> str:
    """A few hours of two business lines (support, search), priced and booked; a budget and a
    cost-centre name for support."""
    response = collector.send(month_like_records())
    assert response.status_code == 200 and response.json()["accepted"] == 12
    priced()
    Budget.objects.create(business_line="support", month=MONTH, amount=Decimal("0.05"), currency="CNY")
    CostCentre.objects.create(business_line="support", code="CC-1001", name="Customer support")
    month_accrue(month=MONTH)
    return str(live_server.url)


@pytest.fixture
def login(browser: Any, books: str) -> Iterator[Any]:
    contexts: list[Any] = []

    def open_home(username: str) -> Any:
        context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
        contexts.append(context)
        return sign_in(context, books, username, path="/")

    yield open_home
    for context in contexts:
        context.close()


def open_finance(page: Any, books: str, link: str = "Finance") -> None:
    """The one click from home, then the month the books were made in: in the first hours of a
    month the three hours of records (from T0) lie in the month before, which the page does not
    open on by itself."""
    page.click(f"header >> text={link}")
    if month_of(timezone.now()) != MONTH:
        page.goto(f"{books}/finance/?month={MONTH:%Y-%m}")


def rows_of(page: Any, name: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"#table-{name} tr", "trs => trs.map(tr => [...tr.children].map(c => c.innerText.trim()))"
    )


def as_number(text: str) -> Decimal:
    negative = text.startswith("(")
    value = Decimal(text.strip("()").replace(",", ""))
    return -value if negative else value


def api(page: Any, url: str) -> Any:
    answer = page.request.get(url)
    assert answer.status == 200, (url, answer.status)
    return answer


def test_it_answers_what_a_line_spent_on_which_accounts_against_budget_and_wasted(login: Any, books: str) -> None:
    page = login(person("fiona", "finance"))
    open_finance(page, books)  # the one click from home
    page.wait_for_selector("#table-spend")
    shot(page, "finance")
    month = f"{MONTH:%Y-%m}"

    spend = rows_of(page, "spend")
    header, support = spend[0], next(r for r in spend if r[0] == "CC-1001 Customer support")
    matrix = api(page, f"{books}/api/v1/ledger/matrix?from={month}").json()["rows"]
    for code in {r["account"] for r in matrix if r["cost_centre"] == "support"}:
        column = next(i for i, h in enumerate(header) if h.startswith(code + " "))
        booked = sum(Decimal(r["amount"]) for r in matrix if r["cost_centre"] == "support" and r["account"] == code)
        assert as_number(support[column]) == booked
    balance = api(page, f"{books}/api/v1/ledger/trial-balance?period={month}").json()
    accounts = {a["code"]: Decimal(a["balance"]) for a in balance["currencies"][0]["accounts"]}
    total = spend[-1]
    for i, label in enumerate(header[1:-1], start=1):
        assert as_number(total[i]) == accounts.get(label.split(" ")[0], Decimal(0)), label
    assert as_number(total[-1]) == sum(v for code, v in accounts.items() if code.startswith("6401"))
    budget = next(r for r in rows_of(page, "budget") if r[0] == "CC-1001 Customer support")
    # The budget due by now (pro-rated over the month's days gone), and the variance against it in a word too.
    to_date, (variance, _, side) = as_number(budget[6]), budget[7].partition(" ")
    assert budget[5] == "0.05" and Decimal(0) <= to_date <= Decimal("0.05")
    assert as_number(variance) == as_number(support[-1]) - to_date and side in ("over", "under", "on budget")
    waste = next(r for r in rows_of(page, "waste") if r[0] == "CC-1001 Customer support")
    assert as_number(waste[2]) == as_number(support[header.index("6401.04 Waste token expense (CNY)")]) > 0
    assert waste[-1] == "agrees"
    tb = rows_of(page, "trial_balance")
    assert tb[-1][1] == "balanced" and as_number(tb[-1][2]) == Decimal(balance["currencies"][0]["debits"])


def test_it_clicks_from_a_ledger_cell_down_to_one_record(login: Any, books: str) -> None:
    page = login(person("fred", "finance"))
    open_finance(page, books)
    cell = page.locator("#table-spend tr", has_text="CC-1001").locator("a[href*='account=6401.04']")
    amount = cell.inner_text()
    cell.click()
    page.wait_for_selector("#table-journal")
    assert f"debits {amount}" in page.inner_text("#totals")
    shot(page, "finance-journal")
    page.locator("#table-journal a", has_text="usage").first.click()
    page.wait_for_selector("#breakdown")
    assert "/waste/" in page.url and "dims.business_line=support" in page.url
    shot(page, "finance-drill-usage")
    page.click("text=All requests")
    page.wait_for_selector("#requests")
    page.locator("#requests a[href*='/waste/record/']").first.click()  # a record's link, not a sortable header
    page.wait_for_url("**/waste/record/**")
    assert "support" in page.inner_text("main")


def test_it_shows_a_scoped_finance_user_only_their_lines_everywhere(login: Any, books: str) -> None:
    page = login(person("sam", "finance", lines=["search"]))
    open_finance(page, books)
    page.wait_for_selector("#table-spend")
    assert "search" in page.inner_text("#scope")
    assert "support" not in page.inner_text("main").lower()
    page.click("#reports >> text=Journal")
    page.wait_for_selector("#table-journal")
    assert {r[4] for r in rows_of(page, "journal")[1:]} == {"search"}
    month = f"{MONTH:%Y-%m}"
    balance = api(page, f"{books}/api/v1/ledger/trial-balance?period={month}").json()
    assert balance["cost_centres"] == ["search"] and balance["currencies"][0]["balanced"]
    journal_debits = as_number(re.search(r"debits ([\d,.()]+)", page.inner_text("#totals")).group(1))  # type: ignore[union-attr]
    assert Decimal(balance["currencies"][0]["debits"]) == journal_debits
    for link in ("Account x cost centre matrix (CSV)", "FOCUS export (CSV)"):
        page.goto(f"{books}/finance/?month={MONTH:%Y-%m}")
        href = page.get_attribute(f"#reports >> text={link}", "href")
        text = api(page, f"{books}{href}").text()
        assert "search" in text and "support" not in text, link
    focus = list(csv.DictReader(io.StringIO(api(page, f"{books}/api/v1/exports/focus?period={month}").text())))
    assert focus and {r["SubAccountId"] for r in focus} == {"search"}


def test_it_has_no_english_labels_left_on_the_chinese_page(login: Any, books: str) -> None:
    page = login(person("lin", "finance"))
    page.select_option("#language select", "zh-hans")
    page.wait_for_load_state()
    open_finance(page, books, "财务")
    page.wait_for_selector("#table-spend")
    shot(page, "finance-zh-hans")
    labels = page.eval_on_selector_all(
        "main th, main h1, main h2, main label, main button, #reports a, #month-actions a",
        "els => els.map(e => e.innerText.trim())",
    )
    # Left alone: paths (/waste/), currencies, CSV, XLSX, API, FOCUS.
    bare = [re.sub(r"/\w+/", "", t) for t in labels]
    leftovers = [t for t in bare if re.search(r"\b(?!CNY|USD|CSV|XLSX|API|FOCUS)[A-Za-z]{3,}\b", t)]
    assert labels and leftovers == [], leftovers
    assert money_text(Decimal("1234.5")) == "1,234.50"
