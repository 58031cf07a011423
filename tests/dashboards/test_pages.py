"""The overview and the waste drill-down, rendered server-side from the rollups: health
metrics against thresholds, money by role, business-line scopes, links down to one record."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from apps.classification.models import HealthThreshold
from tests import factories

pytestmark = pytest.mark.django_db


def link_of(page: str, label: str) -> str:
    """The first link in the table row whose first cell is `label`."""
    found = re.search(rf"<td class=\"text\">{re.escape(label)}</td>\s*<td><a href=\"([^\"]+)\"", page)
    assert found, f"no row {label!r} in the page"
    return html.unescape(found.group(1))


def test_it_shows_the_health_metrics_against_their_thresholds(traffic, as_user) -> None:
    page = as_user("viewer").get("/overview/").content.decode()

    cards = dict(re.findall(r'class="card (\w+)" data-metric="(\w+)"', page)[i][::-1] for i in range(4))
    assert cards == {"effective": "breach", "waste": "breach", "cache_hit": "breach", "shadow": "ok"}
    # Of the 3,984 tokens computed in each moment (5,520 less the 1,536 served from the cache):
    # effective 2,936, waste 1,048; the cache hit is 1,536 of the 4,800 prompt tokens.
    assert "73.7%" in page and "26.3%" in page and "32.0%" in page
    figures = dict(re.findall(r'data-figure="(\w+)" data-value="([^"]+)"', page))
    assert float(figures["effective_ratio"]) == 2936 / 3984 and float(figures["waste_rate"]) == 1048 / 3984
    assert float(figures["cache_hit_rate"]) == 1536 / 4800 and float(figures["shadow_ratio"]) == 0
    assert 'src="/finance/plotly.min.js"' in page and "Plotly.newPlot" in page and "tokens-by-class" in page
    assert "16,560" in page


def test_it_judges_against_the_thresholds_table_and_the_shown_lines_row(traffic, as_user) -> None:
    HealthThreshold.objects.filter(business_line="").update(effective_min="0.70", cache_hit_min="0.30")
    HealthThreshold.objects.create(business_line="search", waste_max="0.50", cache_hit_min="0.10")

    page = as_user("engineer").get("/overview/").content.decode()
    search = as_user("engineer").get("/overview/?dims.business_line=search").content.decode()

    cards = dict(reversed(pair) for pair in re.findall(r'class="card (\w+)" data-metric="(\w+)"', page))
    assert cards == {"effective": "ok", "waste": "breach", "cache_hit": "ok", "shadow": "ok"}
    # search: its own waste limit, the defaults row's effective limit
    cards = dict(reversed(pair) for pair in re.findall(r'class="card (\w+)" data-metric="(\w+)"', search))
    assert cards["waste"] == "ok" and "healthy at or below 50.0%" in search and "at or above 70.0%" in search


@pytest.mark.parametrize(("role", "money"), [("finance", True), ("admin", True), ("engineer", False)])
def test_it_shows_money_only_to_finance_and_admin(traffic, as_user, role, money) -> None:
    overview = as_user(role).get("/overview/").content.decode()
    waste = as_user(role).get("/waste/?class=waste").content.decode()

    assert ('id="spend"' in overview) is money
    assert ("CNY" in overview) is money and ("CNY" in waste) is money


def test_a_granted_engineer_sees_money(traffic, as_user) -> None:
    assert 'id="spend"' in as_user("engineer", money=True).get("/overview/").content.decode()


def test_it_drills_from_a_class_down_to_one_record(traffic, as_user) -> None:
    client: Client = as_user("engineer")
    page = client.get("/overview/").content.decode()

    for label in ("waste", "waste.timeout", "qwen2.5-7b-instruct", "support", "faq", "reason"):
        response = client.get(link_of(page, label))
        assert response.status_code == 200, label
        page = response.content.decode()
    rows = re.findall(r'<td class="text"><a href="([^"]+)">(chatcmpl-[^<]+)</a>', page)
    assert len(rows) == 3  # the three timeouts of support / faq / reason
    assert page.count(">timeout<") == 3
    record = client.get(html.unescape(rows[0][0])).content.decode()
    assert rows[0][1] in record and "support" in record and "timeout" in record


def test_the_breakdown_numbers_sum_to_the_class(traffic, as_user) -> None:
    page = as_user("viewer").get("/waste/?class=waste").content.decode()

    assert ">2,604</a>" in page and ">540</a>" in page  # 3 x (688 + 180) timed out, 3 x 180 truncated
    assert "<th>3,144</th>" in page


def test_a_scoped_user_sees_only_its_business_lines(traffic, as_user) -> None:
    client = as_user("engineer", lines=["support"])

    overview = client.get("/overview/").content.decode()
    waste = client.get("/waste/?class=waste").content.decode()
    requests = client.get("/waste/requests/").content.decode()

    assert ">support<" in overview and ">search<" not in overview
    assert "waste.timeout" in waste and "waste.truncated" not in waste
    assert "search" not in re.sub(r"<header>.*?</header>", "", requests, flags=re.S).replace("Your business", "")
    assert requests.count("chatcmpl-") == 6


def test_a_scoped_user_cannot_open_another_lines_record(traffic, as_user) -> None:
    everyone = as_user("viewer").get("/waste/requests/?dims.business_line=search").content.decode()
    href = html.unescape(re.findall(r'<td class="text"><a href="([^"]+)">chatcmpl', everyone)[0])

    assert as_user("viewer").get(href).status_code == 200
    assert as_user("engineer", lines=["support"]).get(href).status_code == 404


def test_it_keeps_the_filters_along_the_drill_down(traffic, as_user) -> None:
    page = as_user("viewer").get("/waste/?range=24h&dims.feature=rank&class=waste").content.decode()

    href = link_of(page, "waste.truncated")
    assert "range=24h" in href and "dims.feature=rank" in href and "reason=waste.truncated" in href
    assert "waste.timeout" not in page


def test_it_pages_requests_with_a_cursor(traffic, as_user, monkeypatch) -> None:
    from apps.dashboards import views

    monkeypatch.setattr(views, "PAGE_SIZE", 5)
    client = as_user("viewer")
    first = client.get("/waste/requests/").content.decode()
    second = client.get(html.unescape(re.search(r'href="([^"]+)" id="next"', first).group(1))).content.decode()

    ids = re.findall(r">(chatcmpl-\d+)</a>", first) + re.findall(r">(chatcmpl-\d+)</a>", second)
    assert len(ids) == 10 and len(set(ids)) == 10


def test_it_keeps_the_pages_from_users_without_a_role(traffic, db) -> None:
    client = Client()
    assert client.get("/overview/").status_code == 302
    client.force_login(factories.finance_user("nobody", role="viewer"))
    client.force_login(type(factories.finance_user("no-role")).objects.create_user("stranger", password="x" * 12))
    assert client.get("/overview/").status_code == 403


def test_it_shows_an_empty_window(as_user) -> None:
    page = as_user("viewer").get("/overview/?from=2020-01-01&to=2020-01-02").content.decode()

    assert "No tokens in this window." in page and 'class="card none"' in page


def test_it_speaks_chinese_after_the_language_switch(traffic, as_user) -> None:
    client = as_user("viewer")
    assert "Waste rate" in client.get("/overview/").content.decode()

    page = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/overview/"}, follow=True).content.decode()

    assert "浪费率" in page and "概览" in page and '<html lang="zh-hans">' in page
    assert "浪费下钻" in client.get("/waste/").content.decode()


def test_it_filters_by_the_caller_the_edges_recorded_labelled_in_both_languages(collector, as_user) -> None:
    callers = (("support-bot", 1200), ("batch-job", 3400))
    records = [factories.record(dims={"business_line": "support", "caller": name},
                                tokens={"prompt": n - 10, "completion": 10}) for name, n in callers]  # fmt: skip
    assert collector.send(records).json()["accepted"] == 2
    viewer = as_user("viewer")

    english = viewer.get("/overview/?range=24h").content.decode()
    chinese = viewer.get("/overview/?range=24h", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    one = viewer.get("/overview/?range=24h&dims.caller=support-bot").content.decode()

    assert re.search(r"<label>caller\s*<select name=\"dims.caller\">", english)
    assert re.search(r"<label>调用方\s*<select name=\"dims.caller\">", chinese)
    assert '<option value="support-bot" >' in english and '<option value="batch-job" >' in english
    assert "4,600" in english and "1,200" in one and "4,600" not in one
