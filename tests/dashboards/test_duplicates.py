"""waste.duplicate lists the actual duplicates, each beside the request it repeats (same
source, prompt hash, model and business line, within the duplicate window before it), and a
record page links to its original and to the other requests of its prompt."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest

from tests.dashboards.conftest import T0
from tests.factories import record

pytestmark = pytest.mark.django_db
HASH = "9f86d081884c7d659a2feaa0c55ad015"
OTHER = "0123456789abcdef0123456789abcdef"


def at(minutes: int, **overrides: Any) -> dict[str, Any]:
    fields = {"dims": {"business_line": "search", "feature": "rank"}, **overrides}
    return record(ts=(T0 + timedelta(minutes=minutes)).isoformat(), **fields)


@pytest.fixture
def repeats(collector: Any) -> dict[str, str]:
    """Two pairs of one prompt (a repeat 2 min after; then 7 min later a new original and a
    repeat), another line's and another model's copy of it, and another prompt once."""
    sent = {
        "first": at(1),
        "repeat": at(3),
        "later": at(10),  # 7 minutes after the repeat: outside the window, an original again
        "repeat-of-later": at(12),
        "other-line": at(2, dims={"business_line": "support", "feature": "faq"}),
        "other-model": at(4, model="llama-3-70b"),
        "other-prompt": at(5, prompt_hash=OTHER),
    }
    response = collector.send(list(sent.values()))
    assert response.json()["accepted"] == len(sent), response.content
    return {name: r["record_id"] for name, r in sent.items()}


def pairs(page: str) -> list[tuple[str, str]]:
    rows = re.findall(r'class="duplicate">([^<]+)</a>.*?class="original">([^<]+)</a>', page, flags=re.S)
    return [(a, b) for a, b in rows]


def test_it_lists_the_duplicates_beside_the_requests_they_repeat(repeats, as_user) -> None:
    page = as_user("engineer").get("/waste/requests/?reason=waste.duplicate").content.decode()

    assert pairs(page) == [
        (repeats["repeat-of-later"], repeats["later"]),
        (repeats["repeat"], repeats["first"]),
    ]
    assert ">120<" in page  # seconds after the original
    # The same two the classification made waste: 2 x (688 uncached prompt + 180 output)
    grouped = as_user("engineer").get("/waste/?group=reason").content.decode()
    assert re.search(r"<td class=\"text\">waste\.duplicate</td>\s*<td><a [^>]+>1,736</a>", grouped)


def test_the_reason_link_of_the_drill_down_reaches_them(repeats, as_user) -> None:
    client = as_user("viewer")
    reasons = client.get("/waste/?class=waste").content.decode()
    link = re.search(r'<td class="text">waste\.duplicate</td>\s*<td><a href="([^"]+)"', reasons)
    assert link
    page = client.get(html.unescape(link.group(1))).content.decode()
    while 'class="duplicate"' not in page:  # reason -> model -> dims ... -> requests
        nxt = re.search(r"<td class=\"text\">[^<]+</td>\s*<td><a href=\"([^\"]+)\"", page) or re.search(
            r'<a href="([^"]+)">requests →</a>', page
        )
        assert nxt, page
        page = client.get(html.unescape(nxt.group(1))).content.decode()
    assert len(pairs(page)) == 2


def test_a_scoped_user_sees_only_its_lines_duplicates(repeats, as_user) -> None:
    assert pairs(as_user("engineer", lines=["support"]).get("/waste/duplicates/").content.decode()) == []
    assert len(pairs(as_user("engineer", lines=["search"]).get("/waste/duplicates/").content.decode())) == 2


def test_a_record_links_to_its_original_and_to_the_duplicates_of_its_prompt(repeats, as_user) -> None:
    client = as_user("engineer")
    listed = client.get("/waste/duplicates/").content.decode()
    href = html.unescape(re.findall(r'<a href="([^"]+)" class="duplicate">', listed)[-1])

    page = client.get(href).content.decode()
    original = re.search(r'<a href="([^"]+)" id="original">([^<]+)</a>', page)
    assert original and original.group(2) == repeats["first"]
    assert 'id="original"' not in client.get(html.unescape(original.group(1))).content.decode()
    same = re.search(r'<a href="([^"]+)" id="same-prompt">', page)
    assert same and f"hash={HASH}" in same.group(1)
    of_prompt = client.get(html.unescape(same.group(1))).content.decode()
    assert len(pairs(of_prompt)) == 2 and repeats["other-prompt"] not in of_prompt
    assert client.get("/waste/duplicates/?hash=nothex").status_code == 404
