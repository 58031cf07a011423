"""`make demo-data` fills every page: over its books (a small one: a few thousand records), each
page of docs/dashboards.md, the finance pages and the audits that a role opens shows data to an
admin, to finance, to an engineer scoped to one business line and to a viewer: no empty state
and at least one row or one figure that is not zero."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from html import unescape
from typing import Any

import pytest
import time_machine
from django.test import Client

from tests.conftest import demo_books_shared

pytestmark = pytest.mark.books_in("Asia/Shanghai")  # as make demo-data keeps them

CLOSED, CURRENT = date(2026, 10, 1), date(2026, 11, 1)
# A page's own empty state (a section of a page may be empty: a bill without bad rows).
EMPTY = re.compile(r'class="[^"]*\bempty-state\b[^"]*"|id="empty"')
MAIN = re.compile(r"<main\b[^>]*>(.*)</main>", re.S)
FIGURE = re.compile(r'data-figure="[^"]+" data-value="([^"]+)"')


def pages(client: Client) -> list[str]:
    got = [
        "/overview/", "/waste/", "/waste/?class=waste", "/waste/?group=feature", "/waste/requests/",
        "/waste/duplicates/", "/alerts/", "/alerts/channels/", "/rules/", "/prices/", "/collectors/", "/budgets/",
        f"/finance/?month={CLOSED:%Y-%m}", f"/finance/journal/?month={CLOSED:%Y-%m}", f"/finance/close/{CLOSED:%Y-%m}/",
        f"/finance/reconciliation/?month={CLOSED:%Y-%m}", "/audits/", f"/audits/{CLOSED:%Y-%m}/",
    ]  # fmt: skip
    requests = client.get("/waste/requests/").content.decode()
    got += [unescape(h) for h in re.findall(r'href="(/waste/(?:record|conversation)/\?[^"]+)"', requests)[:2]]
    return got


def empty(html: str) -> str:
    """Why a page shows nothing ('' when it shows data)."""
    found = MAIN.search(html)
    main = found.group(1) if found else html
    if marker := EMPTY.search(main):
        return f"an empty state: {main[max(0, marker.start() - 80) : marker.end() + 160]!r}"
    figures = [v for v in FIGURE.findall(main) if v not in ("0", "0.00", "0.0")]
    if "<td" not in main and not figures:
        return "no row and no figure"
    return ""


NOW = datetime(2026, 11, 3, 12, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def demo_books(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with demo_books_shared(django_db_blocker, NOW):
        yield


@pytest.fixture
def books(demo_books: None, db: None) -> Iterator[None]:
    with time_machine.travel(NOW, tick=True):
        yield


def test_every_page_shows_data_to_every_role(books: None, as_user: Callable[..., Client]) -> None:
    roles = {
        "admin": as_user("admin"),
        "finance": as_user("finance"),
        "engineer of legal": as_user("engineer", lines=["legal"]),
        "viewer": as_user("viewer"),
    }
    shown: dict[str, int] = dict.fromkeys(roles, 0)
    left: dict[str, str] = {}
    listed = {role: pages(client) for role, client in roles.items()}  # a record of the role's own lines
    for role, client in roles.items():
        for page in listed[role]:
            response = client.get(page, follow=True)
            if response.status_code == 403:  # not this role's page (the nav does not offer it)
                continue
            shown[role] += 1
            if response.status_code != 200:
                left[f"{role}: {page}"] = f"answered {response.status_code}"
            elif why := empty(response.content.decode()):
                left[f"{role}: {page}"] = why
    last_month = roles["admin"].get("/overview/?range=last-month").content.decode()

    assert shown["admin"] == len(listed["admin"]) == 20 and min(shown.values()) >= 8, shown
    assert not left, "\n".join(f"{page}: {why}" for page, why in left.items())
    # The hosted copywriter's prompt-cache writes, under the classes table.
    assert 'id="cache-writes"' in last_month


def test_the_check_tells_an_empty_page() -> None:
    assert empty('<main><div class="empty-state" id="empty">No tokens yet</div></main>')
    assert not empty('<main><table><tr><td>1</td></tr></table><p class="empty">No bad rows.</p></main>')
    assert empty("<main><h1>Budgets</h1><p>none</p></main>") == "no row and no figure"
    assert empty('<main><span data-figure="tokens" data-value="0">0</span></main>') == "no row and no figure"
    assert not empty('<main><table><tr><td class="text">legal</td></tr></table></main>')
    assert not empty('<main><span data-figure="tokens" data-value="1200">1,200</span></main>')


def test_the_demo_fills_what_a_new_user_opens_first(books: None, as_user: Callable[..., Client]) -> None:
    """The closed month's audit, a supplier's bill that reconciles but for one planted difference, an
    enabled alert channel that delivered, every collector key seen and its rejections in words."""
    from apps.alerts.models import Channel
    from devtools.demo_ops import PLANTED_AMOUNT, SUPPLIER

    admin = as_user("admin")
    audits = admin.get("/audits/").content.decode()
    bills = admin.get(f"/finance/reconciliation/?month={CLOSED:%Y-%m}").content.decode()
    channels = admin.get("/alerts/channels/").content.decode()
    collectors = admin.get("/collectors/").content.decode()

    assert f'href="/audits/{CLOSED:%Y-%m}/"' in audits
    assert SUPPLIER in bills and f"{PLANTED_AMOUNT:,.2f}" in bills
    enabled = Channel.objects.filter(disabled_at__isnull=True)
    assert enabled.exists() and all(c.notifications.filter(status="sent").exists() for c in enabled)
    assert all(c.name in unescape(channels) for c in enabled)
    keys = re.search(r'<table class="data" id="keys">(.*?)</table>', collectors, re.S)
    never = '<td class="text">\u2013</td>'  # the page's dash for a key never seen
    assert keys and never not in keys.group(1), "a key never seen"
    assert "{'" not in unescape(collectors) and "['" not in unescape(collectors), "a rejection reason as Python"
