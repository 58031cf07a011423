"""A record page says where each of its tokens went (class.reason, cost, rule set version) and
links to its retry chain, its original and its conversation; a conversation lists its requests."""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from apps.classification.models import RuleSet
from apps.dashboards.selectors import records_cost
from apps.ingest.models import Record
from tests.dashboards.conftest import T0, priced
from tests.dashboards.test_tables import download
from tests.dashboards.test_waste_why import cells
from tests.factories import record

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(collector: Any) -> dict[str, str]:
    """One conversation: a plan, a timed-out step, its retry that succeeds but is cut off, and the
    plan sent again; another conversation's request."""
    dims = {"business_line": "support", "feature": "agent", "conversation_id": "conv-7"}

    def at(minutes: int, step: str, **more: Any) -> dict[str, Any]:
        fields = {"dims": {**dims, "step": step}, "prompt_hash": None, **more}
        return record(ts=(T0 + timedelta(minutes=minutes)).isoformat(), **fields)

    first = at(1, "plan", record_id="req-plan", prompt_hash="aa" * 16)
    timeout = at(2, "act", record_id="req-act", **{"outcome.status": "timeout", "outcome.finish_reason": None})
    retry = at(3, "act", record_id="req-act-2", retry_of="req-act", attempt=2, **{"outcome.finish_reason": "length"})
    again = at(20, "plan", record_id="req-plan-again", prompt_hash="aa" * 16)
    other = record(ts=T0.isoformat(), dims={"business_line": "support", "conversation_id": "conv-8"}, prompt_hash=None)
    response = collector.send([first, timeout, retry, again, other])
    assert response.json()["accepted"] == 5, response.content
    priced()
    return {"retry": retry["record_id"]}


def record_page(client: Any, record_id: str) -> str:
    listed = client.get("/waste/requests/?range=24h").content.decode()
    href = re.search(rf'<a href="([^"]+)">{re.escape(record_id)}</a>', listed)
    assert href, record_id
    return client.get(html.unescape(href.group(1))).content.decode()


def test_a_record_shows_each_components_reason_cost_and_rule_set(agent, as_user) -> None:
    page = record_page(as_user("finance"), "req-act-2")

    rows = {r[0]: r for r in cells(page, "components")}
    # 1,200 prompt (512 cached), 180 output cut off at max_tokens; prices 2 / 0.5 / 8 per million
    assert [rows["cached prompt"][i] for i in (1, 2)] == ["512", "cache.prefix_cache"]
    assert [rows["uncached prompt"][i] for i in (1, 2)] == ["688", "effective.input"]
    assert [rows["output"][i] for i in (1, 2)] == ["180", "waste.truncated"]
    costs = {name: row[3] for name, row in rows.items()}
    assert costs == {"cached prompt": "0.000256 CNY", "uncached prompt": "0.001376 CNY", "output": "0.001440 CNY"}
    version = RuleSet.objects.get(status="active").version
    assert f"Classified by rule set v{version}." in page
    engineer = record_page(as_user("engineer"), "req-act-2")
    assert "waste.truncated" in engineer and "CNY" not in engineer


def test_a_record_links_its_retry_chain_and_its_conversation(agent, as_user) -> None:
    client = as_user("engineer")
    page = record_page(client, "req-act-2")

    chain = re.search(r'<p id="retries">(.*?)</p>', page, flags=re.S)
    assert chain and re.findall(r">(req-[^<]+)<", chain.group(1)) == ["req-act", "req-act-2"]
    timed_out = client.get(html.unescape(re.search(r'<a href="([^"]+)">req-act</a>', chain.group(1)).group(1)))
    assert "waste.timeout" in timed_out.content.decode()
    link = re.search(r'<a href="([^"]+)" id="conversation">', page)
    assert link
    conversation = client.get(html.unescape(link.group(1))).content.decode()
    order = [r[1] for r in cells(conversation, "conversation")]
    assert order == ["req-plan", "req-act", "req-act-2", "req-plan-again"]
    assert 'id="repeats"' in conversation and conversation.count('class="repeat"') == 1


def test_a_scoped_user_sees_only_its_lines_conversations(agent, as_user) -> None:
    first, last = T0 - timedelta(days=1), T0 + timedelta(days=1)
    url = f"/waste/conversation/?from={first:%Y-%m-%d}&to={last:%Y-%m-%d}&id=conv-7"
    assert len(cells(as_user("viewer", lines=["support"]).get(url).content.decode(), "conversation")) == 4
    other = as_user("viewer", lines=["search"]).get(url)
    assert other.status_code == 200 and "req-plan" not in other.content.decode()
    assert as_user("viewer").get("/waste/conversation/").status_code == 404


def test_it_groups_the_waste_by_conversation_and_opens_one(agent, as_user) -> None:
    client = as_user("engineer")
    page = client.get("/waste/?group=conversation").content.decode()

    # conv-7: the timeout's 688 + 180, the retry's 180 cut off at max_tokens; conv-8 wasted nothing
    assert [r[:4] for r in cells(page, "grouped")] == [["conv-7", "1,048", "19 %", "5,520"]]
    assert 'id="conversations-note"' in page
    href = re.search(r'<td class="text">conv-7</td>\s*<td><a href="([^"]+)"', page)
    assert href and len(cells(client.get(html.unescape(href.group(1))).content.decode(), "conversation")) == 4
    effective = cells(client.get("/waste/?group=conversation&class=effective").content.decode(), "grouped")
    assert [r[0] for r in effective] == ["conv-7", "conv-8"]
    assert cells(
        as_user("engineer", lines=["search"]).get("/waste/?group=conversation").content.decode(), "grouped"
    ) == [["No tokens in this window."]]


def conversation_url(**more: str) -> str:
    first, last = T0 - timedelta(days=1), T0 + timedelta(days=1)
    query = "&".join(f"{k}={v}" for k, v in more.items())
    return f"/waste/conversation/?from={first:%Y-%m-%d}&to={last:%Y-%m-%d}&id=conv-7" + (f"&{query}" if query else "")


def test_a_conversation_sorts_costs_and_downloads_as_shown(agent, as_user) -> None:
    finance = as_user("finance")
    by_attempt = cells(finance.get(conversation_url(sort="-attempt")).content.decode(), "conversation")
    # the retry first; the number it was sent as stays with it
    assert by_attempt[0][1] == "req-act-2" and by_attempt[0][0] == "3"
    name, rows = download(finance, conversation_url(download="conversation", sort="-cost_CNY"))
    assert "conv-7" in name and "sort=-cost_CNY" in name
    assert rows[0][0] == "#" and rows[0][-1] == "Cost (CNY)"
    costs = [Decimal(r[-1]) for r in rows[1:]]
    assert len(costs) == 4 and costs == sorted(costs, reverse=True) and costs[0] > 0
    records = list(Record.objects.filter(dims__dims__conversation_id="conv-7").select_related("model", "dims"))
    assert sum(costs) == sum(c.amount for c in records_cost(records=records).values())
    _name, engineer = download(as_user("engineer"), conversation_url(download="conversation", format="csv"))
    assert [r[1] for r in engineer[1:]] == ["req-plan", "req-act", "req-act-2", "req-plan-again"]
    assert not any(h.startswith("Cost") for h in engineer[0])


def test_a_records_components_download_with_their_cost(agent, as_user) -> None:
    client = as_user("finance")
    page = record_page(client, "req-act-2")
    link = re.search(r'<a href="([^"]+)" data-download="components-csv">', page)
    assert link is not None
    response = client.get("/waste/record/" + html.unescape(link.group(1)))  # the link is the page's query
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[0] == ["Component", "Tokens", "Class.reason", "Cost (CNY)"]
    assert {r[0]: (r[1], r[2], r[3]) for r in rows[1:]} == {
        "cached prompt": ("512", "cache.prefix_cache", "0.000256"),
        "uncached prompt": ("688", "effective.input", "0.001376"),
        "output": ("180", "waste.truncated", "0.001440"),
    }
