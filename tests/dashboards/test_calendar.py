"""The filter form people read at a glance: calendar presets (today, this month, last month, month
to date, custom dates) are days and months of the accounting zone; times are shown in the reader's
display zone (chosen on the page, kept in the session) without microseconds; the dims are
dropdowns of the values the reader may see."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
import time_machine
from django.test import Client, RequestFactory
from django.urls import reverse

from apps.dashboards import selectors
from apps.dashboards.filters import filters_from
from apps.ingest.models import Record
from apps.ingest.selectors import dim_values
from tests.factories import record

pytestmark = pytest.mark.django_db

# Three quarters of an hour into December in Shanghai: November is "last month".
NOW = datetime(2026, 11, 30, 16, 45, tzinfo=UTC)
SHANGHAI_MIDNIGHT = {
    "nov": datetime(2026, 10, 31, 16, tzinfo=UTC),
    "dec": datetime(2026, 11, 30, 16, tzinfo=UTC),
    "jan": datetime(2026, 12, 31, 16, tzinfo=UTC),
}


def _filters(**query: str) -> Any:
    return filters_from(RequestFactory().get("/", query), now=NOW)


def _tokens(**query: str) -> int:
    series = selectors.class_series(flt=_filters(**query), lines=None)
    return sum(tokens for by_period in series.values() for tokens in by_period.values())


@pytest.fixture
def edge(collector: Any, settings: Any) -> None:
    """The last local half hour of November (1,100 tokens) and the first of December (3,300)."""
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    late = record(
        ts="2026-11-30T23:30:00.123456+08:00",
        tokens={"prompt": 1000, "completion": 100},
        prompt_hash="a" * 32,
        dims={"business_line": "support", "feature": "faq"},
    )
    early = record(
        ts="2026-12-01T00:30:00+08:00",
        tokens={"prompt": 3000, "completion": 300},
        prompt_hash="b" * 32,
        dims={"business_line": "search", "feature": "rank"},
    )
    with time_machine.travel(NOW, tick=False):
        assert collector.send([late, early]).json()["accepted"] == 2


@time_machine.travel(NOW, tick=False)
def test_the_calendar_presets_are_windows_of_the_accounting_zone(edge: None) -> None:
    windows = {
        key: (f.start, f.end) for key in ("today", "this-month", "last-month", "mtd") for f in [_filters(range=key)]
    }

    assert windows == {
        "today": (SHANGHAI_MIDNIGHT["dec"], datetime(2026, 12, 1, 16, tzinfo=UTC)),
        "this-month": (SHANGHAI_MIDNIGHT["dec"], SHANGHAI_MIDNIGHT["jan"]),
        "last-month": (SHANGHAI_MIDNIGHT["nov"], SHANGHAI_MIDNIGHT["dec"]),
        "mtd": (SHANGHAI_MIDNIGHT["dec"], datetime(2026, 11, 30, 17, tzinfo=UTC)),  # the next whole hour
    }
    assert _tokens(range="last-month") == 1100
    assert _tokens(range="today") == _tokens(range="mtd") == _tokens(range="this-month") == 3300
    assert _filters(range="last-month").params() == {"range": "last-month"}
    assert _filters(range="last-month").granularity == "day" and _filters(range="today").granularity == "hour"


@time_machine.travel(NOW, tick=False)
def test_a_chosen_preset_wins_over_the_dates_left_in_the_form(edge: None) -> None:
    chosen = _filters(range="last-month", **{"from": "2026-11-30", "to": "2026-11-30"})
    custom = _filters(range="custom", **{"from": "2026-11-30", "to": "2026-11-30"})

    assert (chosen.range, chosen.start) == ("last-month", SHANGHAI_MIDNIGHT["nov"])
    assert (custom.range, custom.start, custom.end) == (
        "",
        datetime(2026, 11, 29, 16, tzinfo=UTC),
        SHANGHAI_MIDNIGHT["dec"],
    )
    assert _tokens(range="custom", **{"from": "2026-11-30"}) == 1100


@time_machine.travel(NOW, tick=False)
def test_a_custom_range_without_dates_says_what_it_needs(edge: None, as_user: Callable[..., Client]) -> None:
    page = as_user("engineer").get("/overview/", {"range": "custom"})

    assert page.status_code == 404


@time_machine.travel(NOW, tick=False)
def test_the_page_offers_the_presets_and_keeps_the_custom_dates(edge: None, as_user: Callable[..., Client]) -> None:
    client = as_user("engineer")
    preset = client.get("/overview/", {"range": "last-month"}).content.decode()
    custom = client.get("/overview/", {"range": "custom", "from": "2026-11-03", "to": "2026-11-30"}).content.decode()

    assert re.search(r'<option value="last-month" selected>Last month</option>', preset)
    assert all(f'value="{key}"' in preset for key in ("today", "this-month", "mtd", "custom", "7d"))
    assert re.search(r'<option value="custom" selected>', custom)
    assert 'name="from" value="2026-11-03"' in custom and 'name="to" value="2026-11-30"' in custom
    # The window as the reader reads it, in the accounting zone by default.
    assert "2026-11-01 00:00 \u2013 2026-12-01 00:00 Asia/Shanghai" in preset


def _shown_time(page: str) -> str:
    found = re.search(r"<dt>Time</dt><dd>([^<]+)</dd>", page)
    assert found, page
    return found.group(1)


@time_machine.travel(NOW, tick=False)
def test_the_display_zone_moves_every_shown_time(edge: None, as_user: Callable[..., Client]) -> None:
    client = as_user("engineer")
    late = Record.objects.get(prompt=1000)
    url = (
        reverse("dashboards:record")
        + "?"
        + urlencode({"ts": late.ts.isoformat(), "source": late.source_id, "key": late.record_key})
    )
    listed = {"range": "custom", "from": "2026-11-30", "to": "2026-11-30"}

    before = client.get(url).content.decode()
    listed_before = client.get("/waste/requests/", listed).content.decode()
    switched = client.post("/display-zone/", {"zone": "Europe/London", "next": "/overview/"})
    after = client.get(url).content.decode()
    listed_after = client.get("/waste/requests/", listed).content.decode()

    assert _shown_time(before) == "2026-11-30 23:30:00 Asia/Shanghai"  # the accounting zone, no microseconds
    assert "2026-11-30 23:30:00" in listed_before
    assert switched.status_code == 302 and switched["Location"] == "/overview/"
    assert _shown_time(after) == "2026-11-30 15:30:00 Europe/London"
    assert "2026-11-30 15:30:00" in listed_after and "23:30:00" not in listed_after
    assert '<option value="Europe/London" selected>' in after
    # Days stay days of the accounting zone: the same window, shown from London.
    assert "2026-11-29 16:00 \u2013 2026-11-30 16:00 Europe/London" in listed_after


def test_an_unknown_display_zone_is_refused_and_changes_nothing(as_user: Callable[..., Client]) -> None:
    client = as_user("engineer")
    refused = client.post("/display-zone/", {"zone": "Mars/Olympus", "next": "/overview/"})
    away = client.post("/display-zone/", {"zone": "UTC", "next": "https://elsewhere.example/"})

    assert refused.status_code == 400 and b"Mars/Olympus" in refused.content
    assert away["Location"] == "/"  # never off the site
    assert client.session["display_zone"] == "UTC"


def _options(page: str, dim: str) -> list[str]:
    found = re.search(rf'<select name="dims\.{dim}">(.*?)</select>', page, re.S)
    assert found, f"no dropdown of {dim}"
    return re.findall(r'<option value="([^"]*)"', found.group(1))


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize(
    ("lines", "shown_lines", "shown_features"),
    [(None, ["", "search", "support"], ["", "faq", "rank"]), (["support"], ["", "support"], ["", "faq"])],
)
def test_the_dims_are_dropdowns_of_the_values_the_reader_may_see(
    edge: None,
    as_user: Callable[..., Client],
    lines: list[str] | None,
    shown_lines: list[str],
    shown_features: list[str],
) -> None:
    page = as_user("engineer", lines=lines).get("/overview/").content.decode()
    chosen = as_user("engineer", lines=lines).get("/waste/", {"dims.feature": "faq"}).content.decode()

    assert _options(page, "business_line") == shown_lines
    assert _options(page, "feature") == shown_features
    assert '<option value="faq" selected>' in chosen
    assert 'type="text" name="dims.' not in page


@time_machine.travel(NOW, tick=False)
def test_the_api_writes_its_instants_in_utc_whatever_the_reader_chose(
    edge: None, as_user: Callable[..., Client]
) -> None:
    client = as_user("engineer")
    client.post("/display-zone/", {"zone": "Asia/Tokyo", "next": "/"})

    listed = client.get("/api/v1/records", {"from": "2026-11-30T00:00:00Z"}).json()["results"]

    assert len(listed) == 2
    assert {datetime.fromisoformat(r["ts"]).utcoffset() for r in listed} == {timedelta(0)}


@time_machine.travel(NOW, tick=False)
def test_a_dim_with_more_values_than_a_list_holds_is_typed(edge: None) -> None:
    assert dim_values(names=["feature", "business_line"], lines=None) == {
        "feature": ["faq", "rank"],
        "business_line": ["search", "support"],
    }
    assert dim_values(names=["feature"], lines=None, limit=1) == {"feature": None}
    assert dim_values(names=["feature"], lines=["search"]) == {"feature": ["rank"]}


@pytest.mark.parametrize(
    "window",
    [
        {"from": "2026-11-30T10:00+99:00", "to": "2026-11-30T12:00+08:00"},
        {"from": "2026-13-45"},
        {"from": "2026-11-30", "to": "2026-02-31"},
        {"from": "9999-12-31T23:30+00:00", "to": "9999-12-31T23:45+00:00"},
        {"from": "0001-01-01T00:10+08:00", "to": "0001-01-01T00:20+08:00"},
    ],
)
def test_a_custom_range_the_calendar_cannot_hold_is_a_404_not_a_500(
    as_user: Callable[..., Client], window: dict[str, str]
) -> None:
    """Issue 31, a Low: /waste/?range=custom&from=...+99:00 was a 500."""
    page = as_user("engineer").get("/waste/", {"range": "custom", **window})

    assert page.status_code == 404
