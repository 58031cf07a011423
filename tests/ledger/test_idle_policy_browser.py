"""The idle policy as finance meets it in a real browser (Playwright + Debian's chromium, as in
tests/dashboards/test_browser.py): the finance page says which policy books the month's idle
capacity, its link explains the policies, and staff reach the setting. Screenshot:
test-artifacts/finance-idle-policy.png."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
import time_machine

from apps.ledger.idle.models import IdlePolicy
from apps.ledger.idle.services import idle_policy_set
from apps.ledger.services.accrual import month_accrue
from tests import factories
from tests.dashboards.test_browser import browser, person, shot, sign_in
from tests.ledger.test_idle_policy import MAR, NOW, _pool_day

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.books_in("UTC")]
__all__ = ["browser"]  # the fixture, shared


@pytest.fixture
def books(live_server: Any) -> str:
    """March 2025's pool-hours (tests/ledger/test_idle_policy.py) booked by use."""
    with time_machine.travel(NOW, tick=False):
        factories.cost_pool(capacity=1000)
        _pool_day(date(2025, 3, 10))
    idle_policy_set(month=MAR, policy=IdlePolicy.Policy.BY_USE)
    month_accrue(month=MAR)
    return str(live_server.url)


@pytest.fixture
def page(browser: Any, books: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    yield sign_in(context, books, person("ada", "admin"), path="/finance/?month=2025-03")
    context.close()


def test_the_finance_page_explains_the_idle_policy_and_leads_to_it(page: Any, books: str) -> None:
    line = page.locator("#idle-policy")

    assert line.get_attribute("data-policy") == "by_use"
    assert "used each pool in the hour, in proportion to their use" in line.inner_text()
    # The month's idle, shared out by use, is still all of it: 6.00 + 20.00.
    assert page.get_attribute('[data-figure="spend"][data-scope="idle"]', "data-value") == "26.00"
    shot(page, "finance-idle-policy")
    line.locator("a[href$='#idle-policy']").click()
    page.wait_for_url("**/figures/#idle-policy")
    assert "By reserved share" in page.locator("#idle-policy + dd").inner_text()
    page.go_back()
    page.click("#idle-policy-change")
    page.wait_for_url("**/admin/ledger/idlepolicy/")
    assert "by use" in page.inner_text("#result_list")
