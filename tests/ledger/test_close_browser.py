"""The two-person close and the plans page in a real browser (Playwright + Debian's chromium):
a finance user follows the open findings' "Fix it" to their page and accepts each with a reason,
prepares last month's close with a note, a second finance user logs in and approves it, and the
page then shows the month closed with its history and who accepted each finding."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from apps.common.buckets import month_of, next_month, previous_month
from apps.ledger.models import CloseRequest, Period
from apps.ledger.services.accrual import recent_accrue
from apps.ledger.services.periods import period_reopen
from apps.plans.planning import budget_set
from apps.pricing.services import dirty_hours_price, price_set
from tests import factories
from tests.dashboards.test_browser import browser, person, shot, sign_in  # noqa: F401 (browser: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def last() -> date:
    """The month that has ended, read when the test starts (a run can cross into a new month)."""
    return previous_month(month_of(timezone.now()))


@pytest.fixture
def reopened_after(transactional_db: None) -> Iterator[None]:
    """Months this test closed are opened again afterwards: the database refuses to truncate
    the journal while a period is closed, and the flush after the test truncates it."""
    yield
    root = factories.finance_user("teardown-root", role="admin")
    for period in Period.objects.filter(status=Period.Status.CLOSED):
        period_reopen(month=period.month, user=root, reason="test teardown")


@pytest.fixture
def books(live_server: Any, truncate_records: None, reopened_after: None, collector: Any, last: date) -> Iterator[str]:
    """Last month's records of two lines through ingest, pricing and accrual, and a budget."""
    hour = datetime(last.year, last.month, 12, 10, tzinfo=UTC)
    ts = (hour + timedelta(minutes=5)).isoformat()
    batch = [factories.record(ts=ts, prompt_hash=None, dims={"business_line": line}) for line in ("search", "ads")]
    timeout = {"outcome.status": "timeout", "outcome.finish_reason": None}  # ads: mostly waste, a finding
    batch += [factories.record(ts=ts, prompt_hash=None, dims={"business_line": "ads"}, **timeout) for _ in range(2)]
    assert collector.send(batch).json()["accepted"] == 4
    price_set(
        model_pattern="*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=hour - timedelta(days=40),
    )
    dirty_hours_price(max_days=60)
    recent_accrue()
    budget_set(business_line="search", month=last, amount=Decimal("100"), currency="CNY")
    yield str(live_server.url)


@pytest.fixture
def login(browser: Any, books: str) -> Iterator[Any]:  # noqa: F811 (the imported fixture)
    contexts: list[Any] = []

    def open_page(username: str, path: str, lands: str | None = None) -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
        contexts.append(context)
        return sign_in(context, books, username, path=path, lands=lands)

    yield open_page
    for context in contexts:
        context.close()


def test_a_finance_user_prepares_the_close_and_a_second_one_approves_it(login: Any, last: date) -> None:
    label = f"{last:%Y-%m}"
    page = login(person("pat", "finance"), "/finance/close/", f"/finance/close/{label}/")  # the month to close now
    page.wait_for_selector("#checklist")
    assert page.url.endswith(f"/finance/close/{label}/")
    assert page.locator("#checklist tbody tr").count() == 8
    assert page.locator("#checklist tr[data-key=missing_rates]").get_attribute("class") == "ok"
    assert page.locator("#checklist tr[data-key=budgets_unspent]").get_attribute("class") == "ok"
    findings = int(page.inner_text("#checklist tr[data-key=open_findings] td:nth-child(2)"))
    assert findings > 0
    shot(page, "finance-close")
    page.click("#checklist tr[data-key=open_findings] a")  # Fix it: the findings, each with its form
    page.wait_for_selector("#items")
    assert page.locator("#items tbody tr[data-item]").count() == findings
    for _ in range(findings):
        form = page.locator("#items form.review").first
        form.locator("select[name=decision]").select_option("accepted")
        form.locator("input[name=note]").fill("Known: a load test's timeouts")
        form.locator("button").click()
        page.wait_for_selector("#messages")
    assert page.locator("#items tbody tr[data-item]").count() == 0
    assert page.locator("#settled tbody tr[data-decision=accepted]").count() == findings
    page.click("#back")
    page.wait_for_selector("#checklist")
    assert page.locator("#checklist tr[data-key=open_findings]").get_attribute("class") == "ok"
    page.fill("#submit textarea[name=note]", "Numbers checked against the invoices")
    page.click("#submit button[value=submit]")
    page.wait_for_selector("#waiting-request")
    assert page.locator("#decide").count() == 0  # the preparer cannot approve
    assert "Numbers checked against the invoices" in page.inner_text("#waiting-request")

    second = login(person("alex", "finance"), f"/finance/close/{label}/")
    assert "pat" in second.inner_text("#waiting-request")
    second.fill("#decide textarea[name=note]", "Agreed")
    second.click("#decide button[value=approve]")
    second.wait_for_selector("#approved-request")

    assert "closed" in second.inner_text("#period-status").lower()
    steps = second.locator("#history tbody tr").evaluate_all("rows => rows.map(r => r.dataset.action)")
    assert steps == ["approved", "closed", "submitted"]
    assert "Numbers checked against the invoices" in second.inner_text("#history")
    assert Period.objects.get(month=last).status == "closed"
    assert CloseRequest.objects.get().decided_by.username == "alex"
    reviews = second.locator("#checklist tr[data-key=open_findings] li[data-decision=accepted]")
    assert reviews.count() == findings and "accepted by pat" in reviews.first.inner_text()
    shot(second, "finance-close-approved")


def test_a_finance_user_edits_budgets_and_copies_them_forward(login: Any, last: date) -> None:
    label, this_month = f"{last:%Y-%m}", f"{next_month(last):%Y-%m}"
    page = login(person("fiona", "finance"), f"/finance/plans/{label}/")
    row = page.locator("#plans tr[data-line=ads]")
    row.locator("input[name$=budget_amount]").fill("250")
    row.locator("select[name$=budget_currency]").select_option("CNY")
    row.locator("input[name$=revenue_amount]").fill("9000")
    row.locator("select[name$=revenue_currency]").select_option("CNY")
    page.click("#plans button[type=submit]")
    page.wait_for_selector(".messages .success")
    assert page.locator("#plans tr[data-line=ads] input[name$=budget_amount]").input_value() == "250.00"
    shot(page, "finance-plans")

    page.goto(page.url.replace(label, this_month))
    page.click("#copy button")
    page.wait_for_selector(".messages .success")

    assert page.locator("#plans tr[data-line=search] input[name$=budget_amount]").input_value() == "100.00"
    assert page.locator("#plans tr[data-line=ads] input[name$=revenue_amount]").input_value() == "9000.00"
