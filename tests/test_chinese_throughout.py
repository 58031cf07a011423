"""Chinese throughout: every page a reader opens from the nav and from docs/dashboards.md — the
overview and waste pages, the finance pages and the close of both months, budgets, audits,
alerts — rendered in zh-Hans over `make demo-data`'s books (a small one: a few thousand
records), with no English word left outside the names the data carries (business lines, models,
features, people, channels), codes (cost centres, currencies) and units. The month pack of the
closed month too: its sheets' names and headers, and each page's CSV downloads: their title and
header lines."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from html import unescape
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from openpyxl import load_workbook

from apps.accounts.models import CollectorKey
from apps.alerts.models import Channel
from apps.alerts.preview import sample_alert
from apps.ingest.models import DimSet, ServedModel
from apps.ledger.models import CloseRequest, CostCentre, FindingReview, PeriodEvent
from apps.ledger.services.closing import close_checklist
from apps.reconciliation.models import Supplier

pytestmark = pytest.mark.books_in("UTC")

# Codes, units and product names a Chinese page writes as they are.
KEPT = {
    "API", "CSV", "XLSX", "JSON", "GPU", "GPUs", "CNY", "USD", "EUR", "UTC", "SLA", "KV", "P&L", "TTFT", "ID", "id",
    "vLLM", "Prometheus", "OpenAPI", "Swagger", "Slack", "DingTalk", "Feishu", "WeCom", "webhook", "Webhook",
    "ms", "s", "h", "M", "K", "k", "B", "MB", "GB", "min", "OK", "ok", "UTC+8", "Asia", "Shanghai", "FOCUS",
    "English", "Chrome", "SSO", "OIDC", "RAG", "LLM", "Parquet", "Excel", "HTTP", "HTTPS", "URL", "SDK",
    "effective", "waste", "cache", "shadow",  # a class's key where a rule or expression names it
    "stop", "length", "abort", "tool_calls", "costplatform",  # vLLM's finish reasons; the product's name
    "link",  # the generic webhook's JSON field, on its preview card
}  # fmt: skip
DOWNLOAD = re.compile(r'href="([^"]*(?:format=csv|download=csv)[^"]*)"')
WORD = re.compile(r"[A-Za-z][A-Za-z0-9&.+_/:-]*[A-Za-z0-9]|[A-Za-z]")


class Visible(HTMLParser):
    """The text a reader sees: no tags, attributes, scripts or styles; code is code on purpose."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hidden += tag in ("script", "style", "code", "pre")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("script", "style", "code", "pre")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.text.append(data)


def names() -> set[str]:
    """What the books name as it was written: dims' values, models, people, keys, channels."""
    seen: set[str] = set()
    for dims in DimSet.objects.values_list("dims", flat=True):
        seen |= {str(v) for v in dims.values()}
    seen |= {part for row in ServedModel.objects.values_list("name", "version") for part in row}
    seen |= set(User.objects.values_list("username", flat=True))
    seen |= set(CollectorKey.objects.values_list("name", flat=True))
    seen |= set(Supplier.objects.values_list("name", flat=True))
    for name, code in CostCentre.objects.values_list("name", "code"):
        seen |= {code, *WORD.findall(name)}
    # The unassigned cost centre's code; the names in the channels' sample alert.
    sample = sample_alert()
    seen |= {"unassigned", sample.business_line}
    seen |= {name for c in sample.figures["_contributors"] for name in (c["model"], c["feature"], c["step"])}
    # What people wrote (a note, a reason) and what a channel's name or its disabling says.
    written = [*Channel.objects.values_list("name", "disabled_reason", "email_to")]
    written += [*CloseRequest.objects.values_list("note", "decision_note")]
    written += [*FindingReview.objects.values_list("note"), *PeriodEvent.objects.values_list("note")]
    for row in written:
        seen |= {word for text in row for word in WORD.findall(text or "")}
    return seen


# Written as code on purpose: an abbreviation or a variable (HMAC-SHA256, COSTPLATFORM_SITE_URL,
# UTC+08:00), a key with its separators (a reason, a feature, a model, a command, a collector key:
# cache.prefix_cache, qwen2.5-7b-instruct, create_collector_key), a time zone, an address, a file.
CODE = re.compile(
    r"[A-Z]{2,}[A-Z0-9_+:-]*|[a-z][a-z0-9]*[-_.][\w.-]+|[A-Z][a-z]+/[A-Za-z_/]+|https?://\S+|[\w/]+\.md|README"
    r"|[A-Z]{2,3}-?\d+|\d.*|v\d.*"
)


def english(text: str, allowed: set[str]) -> list[str]:
    words = []
    for word in WORD.findall(unescape(text)):
        bare = word.strip(".:/-_")
        if bare in allowed or CODE.fullmatch(bare):
            continue
        words.append(word)
    return words


def where(text: str, word: str) -> str:
    """The word with a little of its sentence, to find it by."""
    at = text.find(word)
    return " ".join(text[max(at - 30, 0) : at + len(word) + 30].split())


def visible(html: str) -> str:
    parser = Visible()
    parser.feed(html)
    return " ".join(parser.text)


def pages(client: Client, closed: date, current: date) -> list[str]:
    got = [
        "/", "/overview/", "/waste/", "/waste/?class=waste", "/waste/requests/", "/waste/duplicates/", "/figures/",
        "/budgets/", "/rules/", "/prices/", "/collectors/", "/alerts/", "/alerts/channels/",
        "/finance/", "/finance/journal/", "/finance/reconciliation/", "/finance/rates/", "/finance/plans/",
        f"/finance/close/{closed:%Y-%m}/", f"/finance/close/{current:%Y-%m}/", "/audits/", f"/audits/{closed:%Y-%m}/",
    ]  # fmt: skip
    got += [f"/finance/close/{current:%Y-%m}/items/{item.key}/" for item in close_checklist(month=current)]
    requests = client.get("/waste/requests/").content.decode()
    got += [unescape(h) for h in re.findall(r'href="(/waste/(?:record|conversation)/\?[^"]+)"', requests)[:2]]
    return got


@pytest.mark.django_db
def test_every_page_of_the_demo_reads_in_chinese(settings: Any, as_user: Callable[..., Client]) -> None:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    with time_machine.travel(datetime(2026, 11, 3, 12, 5, tzinfo=UTC), tick=True):
        call_command("demo_data", "--records", "3000", stdout=io.StringIO())
        closed, current = date(2026, 10, 1), date(2026, 11, 1)
        client = Client(raise_request_exception=False)
        client.force_login(User.objects.create_superuser("zh-admin", "zh@example.com", "x"))
        client.cookies["django_language"] = "zh-hans"
        allowed = KEPT | names()

        # The other roles read the pages their role opens (a refusal is another test's), some in
        # their own words: a scoped engineer's notes, a viewer's pages without money.
        others = {"finance": as_user("finance"), "engineer of search": as_user("engineer", lines=["search"])}
        others["viewer"] = as_user("viewer")
        for other in others.values():
            other.cookies["django_language"] = "zh-hans"

        left: dict[str, list[str]] = {}
        downloads: set[str] = set()
        opened = dict.fromkeys(others, 0)
        for page in pages(client, closed, current):
            response = client.get(page, follow=True)
            html = response.content.decode()
            if response.status_code != 200 or 'lang="zh-hans"' not in html:
                left[page] = [f"answered {response.status_code}"]
            elif found := english(text := visible(html), allowed):
                left[page] = [f"{word!r} in “{where(text, word)}”" for word in sorted(set(found))]
            downloads |= {urljoin(page, unescape(h)) for h in DOWNLOAD.findall(html)}
            for role, other in others.items():
                seen = other.get(page)
                opened[role] += seen.status_code == 200
                if seen.status_code == 200 and (found := english(text := visible(seen.content.decode()), allowed)):
                    left[f"{role}: {page}"] = [f"{word!r} in “{where(text, word)}”" for word in sorted(set(found))]

        # Each page's CSV: its header line (under a title line where it has one). The API's CSV
        # (/api/v1/...) keeps its keys: a script reads them.
        for download in sorted(d for d in downloads if not d.startswith("/api/")):
            got = client.get(download)
            lines = got.content.decode("utf-8-sig").splitlines() if got.status_code == 200 else []
            head = " ".join(lines[:2] if lines and "," not in lines[0] else lines[:1])
            if found := english(head.replace(",", " "), allowed) if head else [f"answered {got.status_code}"]:
                left[f"download {download}"] = sorted(set(found))

        pack = load_workbook(io.BytesIO(client.get(f"/finance/pack/{closed:%Y-%m}.xlsx").content))
        for sheet in pack.worksheets:
            head = [sheet.title] + [str(c) for row in sheet.iter_rows(values_only=True) for c in row if c]
            if found := english(" ".join(head), allowed):
                left[f"pack: {sheet.title}"] = sorted(set(found))

    assert opened["finance"] > 25 and opened["engineer of search"] > 12 and opened["viewer"] > 10, opened
    assert not left, "\n".join(f"{page}:\n    " + "\n    ".join(words) for page, words in left.items())


def test_the_check_finds_english_and_passes_names() -> None:
    allowed = KEPT | {"customer-service", "faq-bot", "demo-preparer"}
    found = english(visible("<p>月末发现 <b>Product owner notified</b></p>"), allowed)
    assert found == ["Product", "owner", "notified"]
    assert english(visible("<p>customer-service 的 faq-bot: 12 ms, CC-1001, qwen2.5-7b-instruct</p>"), allowed) == []
    assert english(visible("<script>var a = 'English';</script><p>词元</p>"), allowed) == []
    assert english(visible("<p>Token 健康指标</p>"), allowed) == ["Token"]
