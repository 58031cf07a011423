"""Waste pages that answer "why": grouped by any dim, the model or the reason across every
reason, and the overview's most wasteful features and steps leading there in one click."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest

from tests.dashboards.conftest import T0
from tests.dashboards.test_pages import link_of
from tests.factories import record

pytestmark = pytest.mark.django_db


def cells(page: str, table_id: str) -> list[list[str]]:
    """The text of each body row's cells of the table `table_id`."""
    table = re.search(rf'id="{table_id}".*?<tbody>(.*?)</tbody>', page, flags=re.S)
    assert table, f"no table {table_id!r}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), flags=re.S)
    texts = (re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S) for row in rows)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in row] for row in texts]


def test_it_groups_the_waste_by_feature_across_every_reason_without_a_class(traffic, as_user) -> None:
    page = as_user("engineer").get("/waste/?group=feature").content.decode()

    rows = cells(page, "grouped")
    # faq: 3 timeouts of 868 tokens; rank: 3 truncated outputs of 180; each of 6 requests of 1,380 tokens
    assert [r[:4] for r in rows] == [["faq", "2,604", "31 %", "8,280"], ["rank", "540", "7 %", "8,280"]]
    assert "<th>3,144</th>" in page and "CNY" not in page


def test_it_groups_by_step_model_and_reason_and_narrows_to_a_class(traffic, as_user) -> None:
    client = as_user("viewer")

    steps = cells(client.get("/waste/?group=step").content.decode(), "grouped")
    models = cells(client.get("/waste/?group=model").content.decode(), "grouped")
    reasons = cells(client.get("/waste/?group=reason").content.decode(), "grouped")
    cached = cells(client.get("/waste/?group=feature&class=cache").content.decode(), "grouped")

    assert [(r[0], r[1]) for r in steps] == [("reason", "2,604"), ("retrieve", "540")]
    assert [(r[0], r[1]) for r in models] == [("qwen2.5-7b-instruct", "3,144")]
    assert [(r[0], r[1]) for r in reasons] == [("waste.timeout", "2,604"), ("waste.truncated", "540")]
    assert [(r[0], r[1]) for r in cached] == [("faq", "3,072"), ("rank", "1,536")]  # 6 x 512, 3 x 512
    assert client.get("/waste/?group=nonsense").status_code == 404


def test_a_grouped_value_leads_to_its_reasons_and_its_requests(traffic, as_user) -> None:
    client = as_user("engineer")
    page = client.get("/waste/?group=feature&range=24h").content.decode()

    reasons = client.get(link_of(page, "faq")).content.decode()
    assert "waste.timeout" in reasons and "waste.truncated" not in reasons
    requests = re.search(r'<a href="([^"]+)">requests →</a>', page)
    assert requests
    listed = client.get(html.unescape(requests.group(1))).content.decode()
    assert listed.count("chatcmpl-") == 6 and "dims.feature=faq" in html.unescape(requests.group(1))


def test_it_shows_money_of_the_groups_only_to_money_readers(traffic, as_user) -> None:
    assert "CNY" in as_user("finance").get("/waste/?group=feature").content.decode()
    assert "CNY" not in as_user("engineer").get("/waste/?group=feature").content.decode()


def test_a_scoped_user_groups_only_its_lines(traffic, as_user) -> None:
    page = as_user("engineer", lines=["search"]).get("/waste/?group=feature").content.decode()

    assert [r[0] for r in cells(page, "grouped")] == ["rank"]


def test_the_overview_ranks_features_and_steps_by_waste_against_the_period_before(traffic, as_user) -> None:
    client = as_user("engineer")
    page = client.get("/overview/").content.decode()

    features = cells(page, "top-waste-feature")
    steps = cells(page, "top-waste-step")
    assert [r[:3] for r in features] == [["faq", "2,604", "0"], ["rank", "540", "0"]]
    assert [r[:2] for r in steps] == [["reason", "2,604"], ["retrieve", "540"]]
    assert page.count('id="spark-feature-') == 2 and "Plotly.newPlot" in page
    assert 'href="/waste/?range=7d&amp;group=feature"' in page
    grouped = client.get("/waste/?range=7d&group=feature").content.decode()
    assert cells(grouped, "grouped")[0][0] == "faq"  # the most wasteful feature, one click away
    faq = client.get(link_of(page, "faq")).content.decode()
    assert "waste.timeout" in faq


def test_the_previous_period_is_the_window_of_the_same_length_before(traffic, collector, as_user) -> None:
    day_before = (T0 - timedelta(hours=22)).isoformat()  # in the 24 hours before the last 24
    failed = {"outcome.status": "timeout", "outcome.finish_reason": None, "prompt_hash": None}
    sent = collector.send([record(ts=day_before, dims={"business_line": "search", "feature": "rank"}, **failed)])
    assert sent.json()["accepted"] == 1

    page = as_user("engineer").get("/overview/?range=24h").content.decode()

    assert [r[:3] for r in cells(page, "top-waste-feature")] == [["faq", "2,604", "0"], ["rank", "540", "868"]]
    later = as_user("engineer").get("/overview/?from=2099-01-01&to=2099-01-01").content.decode()
    assert "No waste in this window." in later


def test_each_reason_says_why_and_how_to_reduce_it_in_the_readers_language(traffic, as_user) -> None:
    client = as_user("engineer")

    reasons = client.get("/waste/?class=waste").content.decode()
    grouped = client.get("/waste/?group=reason").content.decode()
    listed = client.get("/waste/requests/?reason=waste.truncated").content.decode()
    client.cookies["django_language"] = "zh-hans"
    chinese = client.get("/waste/?class=waste").content.decode()

    timeout = next(r for r in cells(reasons, "breakdown") if r[0] == "waste.timeout")
    assert "timed out" in timeout[-1] and "To reduce it: Raise the client timeout" in timeout[-1]
    assert "cut off at max_tokens" in next(r for r in cells(grouped, "grouped") if r[0] == "waste.truncated")[-1]
    assert 'id="reason-help"' in listed and "Raise max_tokens" in listed
    assert "超时请求的提示词与输出。" in chinese and "如何减少" in chinese and "timed out" not in chinese


def test_a_scoped_user_sees_only_its_lines_most_wasteful_features(traffic, as_user) -> None:
    page = as_user("engineer", lines=["search"]).get("/overview/").content.decode()

    assert [r[:2] for r in cells(page, "top-waste-feature")] == [["rank", "540"]]
    assert [r[0] for r in cells(page, "top-waste-step")] == ["retrieve"]
