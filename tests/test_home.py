"""The home page sends each person to their pages: finance to the books, engineers and viewers
to the overview and the waste, admins also to what a new platform still needs set up, read
live from the database."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from html import unescape

import pytest
from django.test import Client

from apps.alerts.models import Channel
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.conftest import Collector

pytestmark = pytest.mark.django_db


_people = itertools.count(1)


def home_of(role: str | None, **headers: str) -> str:
    user = factories.finance_user(f"home-{role}-{next(_people)}", role=role or "finance")
    if role is None:
        user.groups.clear()
    client = Client()
    client.force_login(user)
    response = client.get("/", **headers)
    assert response.status_code == 200
    return response.content.decode()


def links(html: str) -> set[str]:
    return {unescape(h).split("?")[0] for h in re.findall(r'href="([^"]+)"', html.split("<main", 1)[1])}


def setup_rows(html: str) -> dict[str, str]:
    rows = re.findall(r'<tr data-done="(yes|no)">\s*<td class="text">(?:<a [^>]*>)?([^<]+)', html)
    return {label.strip(): done for done, label in rows}


def test_it_sends_finance_to_the_books_and_engineers_to_the_waste() -> None:
    finance, engineer, viewer = home_of("finance"), home_of("engineer"), home_of("viewer")

    assert {"/finance/", "/audits/"} <= links(finance) and "/waste/" not in links(finance)
    assert any(link.startswith("/finance/close/") for link in links(finance))
    assert {"/overview/", "/waste/"} <= links(engineer) and "/finance/" not in links(engineer)
    assert {"/overview/", "/waste/"} <= links(viewer)
    assert 'id="setup"' not in finance + engineer + viewer  # the setup checklist is the admins'


def test_it_tells_someone_without_a_role_how_to_get_one() -> None:
    html = home_of(None)

    assert 'id="no-role"' in html and "/finance/" not in links(html) and "/overview/" not in links(html)


def test_it_shows_admins_what_is_still_to_set_up(collector: Collector) -> None:
    before = setup_rows(home_of("admin"))
    assert before["Alert channels"] == "no" and before["Site address"] == "no"  # tests run on localhost

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    ts = (hour + timedelta(minutes=5)).isoformat()
    assert collector.send([factories.record(ts=ts, model="never-priced")]).json()["accepted"] == 1
    price_set(model_pattern="other-*", prices={"input": Decimal("1")}, effective_from=hour - timedelta(days=1))
    hours_price(start=hour, end=hour + timedelta(hours=1))
    Channel.objects.create(name="ops", kind=Channel.Kind.WEBHOOK, url="http://127.0.0.1:9/hook")
    after = setup_rows(home_of("admin"))

    assert after["Collector keys"] == "yes"  # the collector fixture's key
    assert after["Alert channels"] == "yes"
    assert after["Prices"] == "no"  # never-priced has tokens and no price


def test_the_chinese_home_page_is_in_chinese() -> None:
    html = home_of("admin", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert "账本" in html or "财务" in html
    labels = [
        unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(r"<(?:h2|th|li)\b[^>]*>(.*?)</", html, re.S)
    ]
    leftovers = [t for t in labels if re.search(r"\b(?!API|POST|COSTPLATFORM_SITE_URL|README|Token)[A-Za-z]{4,}\b", t)]
    assert labels and leftovers == [], leftovers
