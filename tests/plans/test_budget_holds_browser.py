"""The budgets page's hard budgets in a real browser (Playwright + Debian's chromium, as in
tests/dashboards/test_browser.py): a finance user sees a spent hard budget refusing, grants an
override with its form, and the page then shows it overridden with the reason. Screenshot:
test-artifacts/budget-holds.png."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.common.buckets import accounting_zone, month_end, month_of, month_start
from apps.plans.models import BudgetOverride
from apps.plans.planning import budget_set
from tests import factories
from tests.dashboards.test_browser import browser, person, shot, sign_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
__all__ = ["browser"]  # the fixture, shared


@pytest.fixture
def site(live_server: Any, truncate_records: None, collector: Any) -> str:
    now = datetime.now(UTC)
    budget_set(business_line="support", month=month_of(now), tokens=100, hard=True)
    budget_set(business_line="search", month=month_of(now), tokens=10**6)
    # Five minutes ago, or the month's first instant in its first five minutes: this month's budget.
    ts = max(now - timedelta(minutes=5), month_start(month_of(now))).isoformat()
    records = [factories.record(ts=ts, dims={"business_line": "support"}) for _ in range(2)]
    assert collector.send(records).json()["accepted"] == 2
    return str(live_server.url)


@pytest.fixture
def page(browser: Any, site: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    yield sign_in(context, site, person("fiona", "finance"), path="/budgets/")
    context.close()


def test_finance_sees_a_spent_hard_budget_refusing_and_overrides_it(page: Any) -> None:
    support = page.locator("#holds tr", has_text="support")
    assert support.get_attribute("data-state") == "refusing"
    assert page.locator("#holds tr", has_text="search").get_attribute("data-state") == "within"
    until = min(datetime.now(UTC) + timedelta(hours=3), month_end(month_of(datetime.now(UTC))) - timedelta(minutes=1))

    support.locator("input[name=until]").fill(f"{until.astimezone(accounting_zone()):%Y-%m-%dT%H:%M}")  # books time
    support.locator("input[name=reason]").fill("support surge after the outage")
    support.locator("button[type=submit]").click()
    page.wait_for_selector("#budget-holds .messages .success")

    shot(page, "budget-holds")
    support = page.locator("#holds tr", has_text="support")
    assert support.get_attribute("data-state") == "overridden"
    assert "support surge after the outage" in support.inner_text()
    assert BudgetOverride.objects.get().granted_by.username == "fiona"
