"""Dims and fields carry human names on every page, in the reader's language: the pages of an
agent's traffic (sent through the collector API) are scanned, in English and in Chinese, for the
raw keys a collector sends or a rule names (`business_line`, `draft_accepted`, `prompt_cached`,
`cached_prompt`, ...), and so is the audit report of the month, whose findings name their dims."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from html import unescape
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client
from django.utils import translation

from apps.audits.models import AuditFinding, AuditReport
from apps.common.buckets import month_of
from apps.common.labels import LABELS, label
from tests.dashboards.conftest import T0, priced
from tests.factories import record

pytestmark = pytest.mark.django_db

PAGES = [
    "/overview/",
    "/waste/",
    "/waste/?class=waste",
    "/waste/?class=waste&reason=waste.timeout&by=feature",
    "/waste/?group=business_line",
    "/waste/?group=feature",
    "/waste/?group=step",
    "/waste/?group=reason",
    "/waste/requests/",
    "/waste/duplicates/",
]
# The other apps' pages: home, rules, prices, collectors, alerts, budgets, the books, the audits.
OTHER_PAGES = [
    "/",
    "/rules/",
    "/prices/",
    "/collectors/",
    "/alerts/",
    "/alerts/channels/",
    "/budgets/",
    "/finance/",
    "/finance/reconciliation/",
    "/finance/rates/",
    "/audits/",
]
# Keys no English page shows either: what a person reads is words, not identifiers.
IDENTIFIERS = [key for key in LABELS if "_" in key]


class Visible(HTMLParser):
    """The text a reader sees: no tags, attributes, scripts or styles."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.hidden = 0

    # Code is written as code on purpose (a built-in rule's name, an expression): not a label.
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hidden += tag in ("script", "style", "code")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("script", "style", "code")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.text.append(data)


def raw_keys(page: str, keys: list[str]) -> list[str]:
    parser = Visible()
    parser.feed(page)
    text = " ".join(parser.text)
    return [key for key in keys if re.search(rf"(?<![\w.-]){re.escape(key)}(?![\w.-])", text)]


@pytest.fixture
def agent(collector: Any) -> None:
    """An agent's requests with every dim a page names: line, team, project, feature, step, env,
    conversation; one timed out, one a duplicate of another."""
    dims = {
        "business_line": "support",
        "team": "bots",
        "project": "helpdesk",
        "feature": "faq",
        "step": "plan",
        "env": "prod",
        "conversation_id": "conv-1",
    }
    at = [(T0 + timedelta(minutes=m)).isoformat() for m in (1, 2, 3)]
    sent = [
        record(ts=at[0], dims=dims, prompt_hash="ab" * 16, **{"tokens.draft": 40, "tokens.draft_accepted": 30}),
        record(ts=at[1], dims=dims, prompt_hash="ab" * 16),
        record(ts=at[2], dims=dims, prompt_hash=None, **{"outcome.status": "timeout", "outcome.finish_reason": None}),
    ]
    assert collector.send(sent).json()["accepted"] == 3
    priced()
    audit_of(dims)


def audit_of(dims: dict[str, str]) -> None:
    """The month's audit with one finding on the agent's dims (the report page lists its dims)."""
    report = AuditReport.objects.create(month=month_of(T0), tokens=3000, started_at=T0, finished_at=T0)
    AuditFinding.objects.create(
        report=report,
        position=1,
        kind="duplicate",
        title="Duplicate computation: 1 repeated prompt",
        dims=dims,
        tokens=1000,
        savings_tokens=1000,
        evidence="/waste/?class=waste",
        suggestion="Cache the answer.",
    )


def pages_of(client: Client) -> dict[str, str]:
    found = {url: client.get(url).content.decode() for url in PAGES}
    listed = found["/waste/requests/"]
    href = re.search(r'<td class="text"><a href="([^"]+)">', listed)
    assert href, "the requests list links no record"
    found["record"] = client.get(unescape(href.group(1))).content.decode()
    conversation = re.search(r'<a href="([^"]+)" id="conversation">', found["record"])
    assert conversation, "the record links no conversation"
    found["conversation"] = client.get(unescape(conversation.group(1))).content.decode()
    found["audit"] = client.get(f"/audits/{month_of(T0):%Y-%m}/").content.decode()
    assert 'class="finding finding-duplicate"' in found["audit"], "the audit report lists no finding"
    for url in OTHER_PAGES:  # every other app's pages, as the admin who may open them all
        response = client.get(url)
        assert response.status_code == 200, url
        found[url] = response.content.decode()
    return found


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_it_shows_no_raw_key_on_any_page(agent: None, as_user: Callable[..., Client], language: str) -> None:
    client = as_user("admin", money=True)
    client.post("/i18n/setlang/", {"language": language, "next": "/"})
    keys = IDENTIFIERS if language == "en" else list(LABELS)
    pages = pages_of(client)
    assert all(f'<html lang="{language}">' in page for page in pages.values())
    found = {name: raw_keys(page, keys) for name, page in pages.items()}
    assert {name: keys for name, keys in found.items() if keys} == {}


def test_it_names_each_field_in_chinese(agent: None, as_user: Callable[..., Client]) -> None:
    client = as_user("admin", money=True)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    page = pages_of(client)["record"]
    for words in ("被接受的草稿词元", "缓存命中的提示", "业务线", "首词元时间"):
        assert words in page, words


@pytest.mark.parametrize(
    ("language", "shown"),
    [("en", "business line = support, conversation = conv-1"), ("zh-hans", "业务线 = support, 会话 = conv-1")],
)
def test_the_audit_report_names_its_dims(
    agent: None, as_user: Callable[..., Client], language: str, shown: str
) -> None:
    client = as_user("admin", money=True)
    client.post("/i18n/setlang/", {"language": language, "next": "/"})
    page = client.get(f"/audits/{month_of(T0):%Y-%m}/").content.decode()

    assert shown in page and "<td>1,000</td>" in page  # counts with separators, as elsewhere
    assert "business_line=" not in page and "conversation_id" not in page


def test_it_sees_a_raw_key_left_on_a_page() -> None:
    page = "<p>business_line = support</p><script>var business_line;</script><a title='draft_accepted'>x</a>"
    page += "<code>prompt_cached</code>"
    assert raw_keys(page, IDENTIFIERS) == ["business_line"]
    with translation.override("en"):
        assert label("business_line") == "business line" and label("region") == "region"
