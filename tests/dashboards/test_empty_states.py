"""An empty page says what to do next: before any record, how records arrive (and a link to the
collectors page); with records outside the window, to widen it; with nothing priced, where
prices are set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from tests.factories import record

pytestmark = pytest.mark.django_db
EMPTY = ["/overview/", "/waste/", "/waste/?class=waste", "/waste/?group=feature"]


@pytest.mark.parametrize("url", EMPTY)
def test_it_says_how_records_arrive_before_the_first(as_user: Callable[..., Client], url: str) -> None:
    page = as_user("engineer").get(url).content.decode()

    assert "No records yet." in page and 'href="/collectors/" id="to-collectors"' in page
    assert "Widen the time range" not in page


@pytest.mark.parametrize("url", EMPTY)
def test_it_says_to_widen_a_window_without_tokens(traffic: None, as_user: Callable[..., Client], url: str) -> None:
    sep = "&" if "?" in url else "?"
    page = as_user("engineer").get(f"{url}{sep}from=2020-01-01&to=2020-01-02").content.decode()

    assert "Widen the time range or remove a filter above." in page and "No records yet." not in page


def test_it_counts_only_a_scoped_users_lines(traffic: None, as_user: Callable[..., Client]) -> None:
    page = as_user("viewer", lines=["nowhere"]).get("/overview/").content.decode()
    assert "No records yet." in page
    assert "No records yet." not in as_user("viewer", lines=["search"]).get("/overview/").content.decode()


def test_it_leads_to_the_prices_when_nothing_is_priced(collector: Any, as_user: Callable[..., Client]) -> None:
    assert collector.send([record(prompt_hash=None)]).json()["accepted"] == 1
    page = as_user("finance").get("/overview/").content.decode()

    assert "nothing priced yet" in page and 'href="/prices/" id="to-prices"' in page
    assert 'id="empty"' not in page


def test_it_says_it_in_chinese(as_user: Callable[..., Client]) -> None:
    client = as_user("engineer")
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    page = client.get("/overview/").content.decode()
    assert "还没有任何记录。" in page and "打开采集器" in page
