"""The dashboards' tables through the Django test client (issue 32, item 3): a request's cost on the
list is its record page's, priced or pooled; money only for a role that sees it; the downloads
hold the rows shown with the filters in their name; a search stays within the reader's lines;
a saved view is the user's own, and its link opens the page under the follower's scope."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from apps.dashboards.models import SavedView
from apps.dashboards.selectors import record_components, records_cost
from apps.dashboards.tables import file_name
from apps.ingest.models import Record
from tests.dashboards.test_record_cost import pooled  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

RANGE = "range=7d"


def download(client: Any, url: str) -> tuple[str, list[list[str]]]:
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    name = re.search(r'filename="([^"]+)"', response["Content-Disposition"])
    assert name is not None
    return name.group(1), list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))


def test_a_requests_cost_on_the_list_is_its_record_pages(traffic: None) -> None:
    records = list(Record.objects.select_related("model", "dims", "source"))
    costs = records_cost(records=records)
    assert {c.currency for c in costs.values()} == {"CNY"}
    for r in records:
        assert costs[r.pk].amount == record_components(record=r).cost, r.record_id


def test_a_pooled_requests_cost_is_its_hours_rate(pooled: datetime) -> None:  # noqa: F811
    records = list(Record.objects.select_related("model", "dims", "source"))
    costs = records_cost(records=records)
    assert all(costs[r.pk].amount == record_components(record=r).cost for r in records)
    assert all(costs[r.pk].amount for r in records)


def test_the_requests_download_is_the_page_shown_with_its_cost(traffic: None, as_user: Any) -> None:
    client = as_user("finance")
    name, rows = download(
        client, f"/waste/requests/?{RANGE}&dims.business_line=support&sort=-cost_CNY&download=requests"
    )
    assert name.endswith(".csv") and "business_line=support" in name and "sort=-cost_CNY" in name
    header, body = rows[0], rows[1:]
    assert header[-1] == "Cost (CNY)" and len(body) == Record.objects.filter(dims__business_line="support").count()
    costs = [Decimal(r[-1]) for r in body]
    assert costs == sorted(costs, reverse=True) and costs[0] > 0
    assert {r[header.index("business line")] for r in body} == {"support"}


def test_an_engineer_sees_no_money_on_any_table(traffic: None, as_user: Any) -> None:
    client = as_user("engineer")
    for url in ("/waste/?class=waste", "/waste/?group=feature", "/waste/requests/", "/overview/"):
        page = client.get(url).content.decode()
        assert "cost_" not in page and "Cost (" not in page, url
    _name, rows = download(client, "/waste/?class=waste&download=breakdown")
    assert rows[0] == ["Reason", "Tokens", "Share"]


def test_a_breakdown_is_costliest_first_where_money_is_shown(traffic: None, as_user: Any) -> None:
    _name, rows = download(as_user("finance"), "/waste/?group=feature&download=grouped&format=csv")
    costs = [Decimal(r[-1]) for r in rows[1:] if r[-1]]
    assert rows[0][-1] == "Cost (CNY)" and costs == sorted(costs, reverse=True) and len(costs) >= 2
    tokens = [int(r[1]) for r in rows[1:]]
    _name, by_tokens = download(as_user("finance"), "/waste/?group=feature&download=grouped&sort=tokens")
    assert [int(r[1]) for r in by_tokens[1:]] == sorted(tokens)


def test_another_format_is_refused_in_words(traffic: None, as_user: Any) -> None:
    response = as_user("viewer").get("/waste/?download=breakdown&format=pdf")
    assert response.status_code == 400 and b"csv or xlsx" in response.content


def test_a_search_stays_within_the_readers_lines(traffic: None, as_user: Any) -> None:
    hidden = Record.objects.filter(dims__business_line="search").first()
    assert hidden is not None
    scoped = as_user("engineer", lines=["support"]).get(f"/waste/requests/?{RANGE}&q={hidden.record_id}")
    assert "No requests match." in scoped.content.decode()
    found = as_user("viewer").get(f"/waste/requests/?{RANGE}&q={hidden.record_id}").content.decode()
    assert found.count(f">{hidden.record_id[:25]}</a>") == 1 and "No requests match." not in found


def test_a_saved_view_is_its_users_and_its_link_opens_the_page(traffic: None, as_user: Any) -> None:
    owner = as_user("engineer")
    query = f"{RANGE}&group=feature&sort=label&after=abc&download=grouped"
    response = owner.post("/views/save/", {"name": "by feature", "path": "/waste/", "query": query})
    saved = SavedView.objects.get()
    assert response.status_code == 302 and saved.query == f"{RANGE}&group=feature&sort=label"
    assert "by feature" in owner.get("/waste/").content.decode()
    other = as_user("viewer")
    assert "by feature" not in other.get("/waste/").content.decode()  # listed for its user only
    opened = other.get(f"/views/{saved.pk}/")
    assert opened.status_code == 302 and opened["Location"] == f"/waste/?{saved.query}"
    owner.post("/views/save/", {"name": "by feature", "path": "/waste/", "query": RANGE})
    assert SavedView.objects.get().query == RANGE  # the same name replaced


def test_a_saved_view_never_leads_off_the_dashboards(traffic: None, as_user: Any) -> None:
    client = as_user("engineer")
    for path in ("https://example.com/", "/finance/", "//example.com/waste/"):
        assert client.post("/views/save/", {"name": "x", "path": path, "query": ""}).status_code == 404, path
    assert client.post("/views/save/", {"name": " ", "path": "/waste/", "query": ""}).status_code == 400
    assert not SavedView.objects.exists()


def test_the_file_name_holds_the_filters_and_nothing_a_file_name_may_not() -> None:
    from apps.dashboards.filters import Filters

    now = datetime.now(UTC)
    flt = Filters(now - timedelta(days=7), now, "7d", {"feature": "a/b 搜"})
    assert file_name("waste", "feature", flt, sort="-cost_CNY") == "waste-feature_range=7d_feature=a-b-_sort=-cost_CNY"
