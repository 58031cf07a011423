"""Waste pages that answer "why", in a real browser: from the overview one click to the most
wasteful feature across every reason; from the waste by reason to the actual duplicates of a
duplicate request and the request it repeats; a record's components and its conversation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.dashboards.conftest import T0
from tests.dashboards.test_browser import ARTIFACTS, browser, open_as, person, shot, site  # noqa: F401 (fixtures)
from tests.factories import record

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def more(site: str, collector: Any) -> str:  # noqa: F811 (the fixture above)
    """Beside the month-like traffic: a prompt sent twice within two minutes, and one agent
    conversation with a timed-out step, its retry and a repeated plan."""

    def at(minutes: int, **fields: Any) -> dict[str, Any]:
        return record(ts=(T0 + timedelta(minutes=minutes)).isoformat(), **fields)

    search = {"business_line": "search", "feature": "rank", "step": "retrieve"}
    agent = {"business_line": "support", "feature": "agent", "conversation_id": "conv-7"}
    sent = [
        at(1, record_id="req-first", dims=search),
        at(3, record_id="req-repeat", dims=search),
        at(4, record_id="req-plan", dims={**agent, "step": "plan"}, prompt_hash="aa" * 16),
        at(5, record_id="req-act", dims={**agent, "step": "act"}, prompt_hash=None, **{"outcome.status": "timeout"}),
        at(6, record_id="req-act-2", dims={**agent, "step": "act"}, prompt_hash=None, retry_of="req-act", attempt=2),
        at(30, record_id="req-plan-again", dims={**agent, "step": "plan"}, prompt_hash="aa" * 16),
    ]
    sent[3]["outcome"]["finish_reason"] = None
    assert collector.send(sent).json()["accepted"] == len(sent)
    return site


def test_an_engineer_reaches_the_most_wasteful_feature_and_the_actual_duplicates(open_as: Any, more: str) -> None:  # noqa: F811
    page = open_as(person("eve", "engineer"))

    top = page.locator("#top-waste-feature tbody tr").first
    assert top.locator("td").first.inner_text() == "faq"
    page.wait_for_selector("#top-waste-feature .spark .main-svg")  # plotly drew the sparkline
    page.locator("#top-waste-feature").screenshot(path=str(ARTIFACTS / "overview-top-waste.png"))
    page.click("#top-waste-feature h2 a")  # one click: every feature, every reason
    page.wait_for_selector("#grouped[data-group=feature]")
    rows = page.locator("#grouped tbody tr")
    assert rows.first.locator("td").first.inner_text() == "faq" and rows.count() >= 3
    shot(page, "waste-by-feature")

    page.click("#group-by a[data-group=reason]")
    duplicate = page.locator("#grouped tbody tr", has_text="waste.duplicate")
    assert "Cache answers of repeated prompts" in duplicate.inner_text()
    duplicate.get_by_role("link", name="requests →").click()
    page.wait_for_selector("#duplicates")
    assert page.locator("#duplicates .duplicate").all_inner_texts() == ["req-repeat"]
    assert page.locator("#duplicates .original").all_inner_texts() == ["req-first"]
    page.click("#duplicates .duplicate")
    page.wait_for_selector("#components")
    assert page.inner_text("#original") == "req-first"
    page.click("#same-prompt")
    page.wait_for_selector("#hash")
    assert page.locator("#duplicates .duplicate").all_inner_texts() == ["req-repeat"]
    shot(page, "waste-duplicates")


def test_a_record_shows_its_components_and_its_conversation(open_as: Any, more: str) -> None:  # noqa: F811
    page = open_as(person("fay", "finance"))
    page.goto(more + "/waste/requests/?dims.feature=agent")
    page.get_by_role("link", name="req-act-2").click()
    page.wait_for_selector("#components")
    reasons = page.locator("#components td.reason").all_inner_texts()
    assert reasons == ["cache.prefix_cache", "effective.input", "effective.output"]
    assert "CNY" in page.inner_text("#components") and "req-act" in page.inner_text("#retries")
    shot(page, "record-components")

    page.click("#conversation")
    page.wait_for_selector("table#conversation")
    order = [row.locator("td").nth(1).inner_text() for row in page.locator("table#conversation tbody tr").all()]
    assert order == ["req-plan", "req-act", "req-act-2", "req-plan-again"]
    assert page.locator("table#conversation tr.repeat").count() == 1
    shot(page, "conversation")
