"""Pages read at a glance: every table's header sits over its cells (text left, numbers right)
on every page, from one rule, checked on real pages rendered from records sent through the
collector API."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.utils import timezone

from apps.common.buckets import month_of
from tests.conftest import T0

pytestmark = pytest.mark.django_db

# A number, or the dash an empty number cell shows.
WORDLESS = re.compile("[0-9\u2013\u2014-]")
PAGES = [
    "/",
    "/overview/",
    "/waste/",
    "/waste/?class=waste",
    "/waste/?class=waste&reason=waste.timeout",
    "/waste/?group=feature",
    "/waste/?group=reason",
    "/waste/requests/",
    "/waste/duplicates/",
    "/prices/",
    "/collectors/",
    "/budgets/",
    "/rules/",
    "/alerts/",
    "/alerts/channels/",
    "/audits/",
    "/finance/",
    "/finance/plans/2026-12/",
    "/finance/close/",
]


class Tables(HTMLParser):
    """Each table's header row and body rows as lists of (is-text, colspan) per cell."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, list]] = []
        self.part = ""
        self.row: list[tuple[bool, int]] | None = None
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self.tables.append({"id": [found.get("id") or ""], "head": [], "body": []})
        elif tag in ("thead", "tbody", "tfoot"):
            self.part = tag
        elif tag == "tr" and self.tables:
            self.row, self.words = [], []
        elif tag in ("th", "td") and self.row is not None:
            classes = (found.get("class") or "").split()
            self.row.append(("text" in classes, int(found.get("colspan") or 1)))
            self.words.append("")

    def handle_data(self, data: str) -> None:
        if self.row is not None and self.row:
            self.words[-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self.row is not None and self.tables:
            where = {"thead": "head", "tbody": "body"}.get(self.part)
            if where:
                cells = zip(self.row, self.words, strict=True)
                self.tables[-1][where].append([(*cell, words.strip()) for cell, words in cells])
            self.row = None


def mismatches(page: str) -> list[str]:
    parser = Tables()
    parser.feed(page)
    found = []
    for table in parser.tables:
        if not table["head"]:
            continue
        head = table["head"][-1]
        for row in table["body"]:
            if any(cell[1] > 1 for cell in row) or len(row) != len(head):
                continue
            for index, ((head_text, _, label), (cell_text, _, words)) in enumerate(zip(head, row, strict=True)):
                where = f"table {table['id'][0]!r} column {index + 1} ({label})"
                if head_text != cell_text:
                    found.append(f"{where}: header text={head_text}, cell text={cell_text}")
                elif words and not WORDLESS.search(words) and not cell_text:
                    # A cell with no digit in it is words, and words read from the left.
                    found.append(f"{where}: {words!r} is aligned as a number")
    return found


@pytest.fixture
def admin_client(traffic: None, as_user: Callable[..., Client]) -> Client:
    return as_user("admin", money=True)


@pytest.mark.parametrize("url", PAGES)
def test_it_puts_each_header_over_its_cells(admin_client: Client, url: str) -> None:
    if url == "/finance/" and month_of(timezone.now()) != month_of(T0):
        url += f"?month={month_of(T0):%Y-%m}"  # the first hours of a month: the traffic is last month's
    response = admin_client.get(url, follow=True)
    assert response.status_code == 200, (url, response.status_code)
    page = response.content.decode()
    assert "<table" in page or url in ("/finance/plans/2026-12/", "/audits/"), url
    assert mismatches(page) == []


def test_it_puts_each_header_over_its_cells_on_a_record_page(admin_client: Client) -> None:
    listed = admin_client.get("/waste/requests/").content.decode()
    href = re.search(r'<td class="text"><a href="([^"]+)">', listed)
    assert href, "the requests list links no record"
    page = admin_client.get(unescape(href.group(1))).content.decode()
    assert 'id="components"' in page
    assert mismatches(page) == []


def test_it_sees_a_header_that_sits_over_the_wrong_cells() -> None:
    page = (
        "<table id='t'><thead><tr><th>Model</th><th>Tokens</th></tr></thead>"
        "<tbody><tr><td class='text'>qwen</td><td>12</td></tr></tbody></table>"
    )
    assert mismatches(page) == ["table 't' column 1 (Model): header text=False, cell text=True"]
    unmarked = page.replace(" class='text'", "")
    assert mismatches(unmarked) == ["table 't' column 1 (Model): 'qwen' is aligned as a number"]


def test_it_aligns_from_one_rule_in_the_base_page(admin_client: Client) -> None:
    page = admin_client.get("/overview/").content.decode()
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "th.text" in style and "td.text" in style
    css = open("apps/common/static/common/pages.css").read()
    assert ":first-child" not in css
