"""The budgets page halfway through a month in a real browser (Playwright + Debian's chromium, as
tests/dashboards/test_browser.py): a line under its budget due by now is green and says "under"
with a minus sign, a line over it red with "over" and a plus, in both languages; each budget to
date is the month's budget pro-rated over the 15 days gone. The clock of the platform travels to
the 16th of next month (the browser keeps its own). Screenshots: test-artifacts/budgets-variance.png
and budgets-variance-zh.png."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from tests.dashboards.test_browser import browser, person, shot, sign_in
from tests.plans.budget_books import DAYS_GONE, HalfMonth, books, mid_month

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
__all__ = ["browser"]  # the fixture, shared

GREEN, RED = "rgb(46, 125, 50)", "rgb(198, 40, 40)"  # pages.css: .variance.favourable / .unfavourable


@pytest.fixture
def half(live_server: Any, truncate_records: None, collector: Any) -> Iterator[tuple[str, HalfMonth]]:
    with time_machine.travel(mid_month(), tick=True):
        yield str(live_server.url), books(collector)


def open_budgets(browser: Any, site: str, locale: str) -> Any:
    context = browser.new_context(viewport={"width": 1500, "height": 1000}, locale=locale)
    return sign_in(context, site, person(f"fiona-{locale}", "finance"), path="/budgets/")


def variance_of(page: Any, scope: str) -> Any:
    return page.locator(f'#budgets tr[data-scope="{scope}"] .variance')


def test_variance_is_green_under_and_red_over_the_budget_pro_rated_to_the_days_gone(
    browser: Any, half: tuple[str, HalfMonth]
) -> None:
    site, books_ = half
    page = open_budgets(browser, site, "en-US")

    share = Decimal(page.get_attribute("#progress", "data-share"))
    assert Decimal(DAYS_GONE) / books_.days <= share < Decimal(DAYS_GONE + 0.01) / books_.days  # the clock ticks
    for scope in ("support", "search"):
        to_date = Decimal(page.get_attribute(f'#budgets tr[data-scope="{scope}"] .to-date', "data-value"))
        assert abs(to_date - books_.due(scope)) <= Decimal("0.01"), scope
        shown = Decimal(variance_of(page, scope).get_attribute("data-value"))
        assert shown == books_.spend[scope] - to_date
    under, over = variance_of(page, "support"), variance_of(page, "search")
    assert under.evaluate("e => getComputedStyle(e).color") == GREEN
    assert under.inner_text().startswith("-") and under.inner_text().endswith("under")
    assert over.evaluate("e => getComputedStyle(e).color") == RED
    assert over.inner_text().startswith("+") and over.inner_text().endswith("over")
    # The budgeted lines' total is theirs; idle capacity has a row of its own and no budget.
    assert page.locator('#budgets tr[data-scope="idle"][data-group="apart"]').count() == 1
    assert page.locator('#budgets tr[data-scope="all"] [data-figure="budget_used"]').count() == 0
    shot(page, "budgets-variance")
    page.context.close()


def test_the_sides_read_in_chinese_too(browser: Any, half: tuple[str, HalfMonth]) -> None:
    site, _ = half
    page = open_budgets(browser, site, "zh-CN")

    assert variance_of(page, "support").inner_text().endswith("低于")
    assert variance_of(page, "search").inner_text().endswith("超出")
    assert variance_of(page, "search").evaluate("e => getComputedStyle(e).color") == RED
    shot(page, "budgets-variance-zh")
    page.context.close()
