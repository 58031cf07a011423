"""The filter form in a real browser: a calendar preset picked from the dropdown draws the month of
the accounting zone, the zone switch in the header moves the times a page shows, and the dims
dropdowns list only the values of the reader's business lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from apps.common.buckets import month_of, month_start, previous_month
from apps.ingest.models import Record
from tests.dashboards.test_browser import browser, open_as, person, shot, site  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.books_in("UTC")]


def _options(page: Any, dim: str) -> list[str]:
    return page.locator(f"select[name='dims.{dim}'] option").evaluate_all("all => all.map(o => o.value)")


def test_a_preset_and_a_dim_picked_from_the_dropdowns_filter_the_page(open_as: Any) -> None:  # noqa: F811
    page = open_as(person("ada", "admin"))

    assert _options(page, "business_line") == ["", "search", "support"]
    page.select_option("select[name=range]", "last-month")
    page.select_option("select[name='dims.business_line']", "support")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**range=last-month**")

    this = month_of(datetime.now(UTC))
    first, last = month_start(previous_month(this)), month_start(this)
    assert page.inner_text("#window-shown") == f"{first:%Y-%m-%d %H:%M} \u2013 {last:%Y-%m-%d %H:%M} UTC"
    assert "business line = support" in page.inner_text(".chips")
    assert page.locator("select[name='dims.business_line']").input_value() == "support"
    shot(page, "overview-last-month")


def test_a_scoped_reader_picks_only_among_their_lines(open_as: Any) -> None:  # noqa: F811
    page = open_as(person("sue", "engineer", lines=["support"]))

    assert _options(page, "business_line") == ["", "support"]
    assert _options(page, "feature") == ["", "faq"]
    assert "rank" not in page.inner_text("#filters")


def test_the_zone_switch_moves_the_times_shown(open_as: Any, site: str) -> None:  # noqa: F811
    page = open_as(person("eve", "engineer"))
    page.goto(site + "/waste/requests/")
    first = page.locator("#requests tbody tr").first.locator("td").nth(1).inner_text()
    newest = Record.objects.order_by("-ts", "-record_key").first()
    assert newest is not None

    with page.expect_navigation():
        page.select_option("#display-zone select", "Asia/Tokyo")  # submits on change, back to the page
    page.wait_for_selector("#requests")
    moved = page.locator("#requests tbody tr").first.locator("td").nth(1).inner_text()

    assert first == f"{newest.ts.astimezone(UTC):%Y-%m-%d %H:%M:%S}"
    assert moved == f"{newest.ts.astimezone(ZoneInfo('Asia/Tokyo')):%Y-%m-%d %H:%M:%S}"
    assert datetime.fromisoformat(moved) - datetime.fromisoformat(first) == timedelta(hours=9)
    assert page.inner_text("#window-shown").endswith("Asia/Tokyo")
    shot(page, "requests-tokyo")
