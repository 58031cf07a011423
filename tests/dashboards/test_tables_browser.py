"""The dashboards' tables in a real browser, as people work with them: sorted by a click on any
header (the order kept in the URL), costliest first with a cost total for a role that sees money,
downloaded as CSV and XLSX in the order shown with the filters in the file name; the requests found
by record, request or conversation id; a saved view opened by a colleague through its link."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from openpyxl import load_workbook

from tests.dashboards.test_browser import browser, open_as, person, shot, site  # noqa: F401 (fixtures)
from tests.dashboards.test_waste_browser import more  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def amounts(page: Any, selector: str) -> list[Decimal | None]:
    """The amounts of the cells, None for an empty one (unpriced)."""
    texts = page.locator(selector).all_inner_texts()
    return [Decimal(t.split()[0].replace(",", "")) if t.strip() else None for t in texts]


def costliest_first(costs: list[Decimal | None]) -> bool:
    """Amounts from the largest down, the unpriced after them."""
    known = [c for c in costs if c is not None]
    return costs == [*sorted(known, reverse=True), *[None] * (len(costs) - len(known))] and bool(known)


def column(page: Any, table: str, key: str) -> list[str]:
    """The cells under the header `key` of `table`, top to bottom."""
    keys = page.locator(f"{table} thead th").evaluate_all("ths => ths.map(th => th.dataset.sort || '')")
    index = keys.index(key) + 1
    return page.locator(f"{table} tbody tr td:nth-child({index})").all_inner_texts()


def numbers(texts: list[str]) -> list[Decimal]:
    return [Decimal(t.replace(",", "").replace("%", "").strip() or "0") for t in texts]


def test_a_table_sorts_by_any_header_and_downloads_what_it_shows(open_as: Any, more: str) -> None:  # noqa: F811
    page = open_as(person("fin", "finance"))
    page.goto(more + "/waste/?group=feature")
    cost = page.locator("#grouped thead th[data-sort^=cost_]")
    assert cost.count() == 1 and cost.get_attribute("aria-sort") == "descending"  # money first
    costs = amounts(page, "#grouped tbody td.cost")
    assert costliest_first(costs) and len(costs) >= 3
    assert amounts(page, "#grouped tfoot .cost-total") == [sum(c for c in costs if c is not None)]

    page.click("#grouped th[data-sort=tokens] a")
    page.wait_for_url("**sort=-tokens**")
    tokens = numbers(column(page, "#grouped", "tokens"))
    assert tokens == sorted(tokens, reverse=True)
    page.click("#grouped th[data-sort=label] a")
    page.wait_for_url("**sort=label**")
    labels = column(page, "#grouped", "label")
    assert labels == sorted(labels, key=str.casefold) and labels != sorted(labels, key=str.casefold, reverse=True)
    page.reload()  # the order is the URL's
    assert column(page, "#grouped", "label") == labels
    shot(page, "waste-by-feature-sorted")

    with page.expect_download() as csv_download:
        page.click("[data-download=grouped-csv]")
    name = csv_download.value.suggested_filename
    assert name.endswith(".csv") and "group=feature" in name and "sort=label" in name
    with open(csv_download.value.path(), encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    assert rows[0][0] == page.inner_text("#grouped th[data-sort=label]").rstrip("▲▼").strip()
    assert [r[0] for r in rows[1:]] == labels and any(h.startswith("Cost (") for h in rows[0])
    with page.expect_download() as xlsx_download:
        page.click("[data-download=grouped-xlsx]")
    assert xlsx_download.value.suggested_filename.endswith(".xlsx")
    sheet = load_workbook(io.BytesIO(xlsx_download.value.path().read_bytes())).active
    assert [row[0] for row in sheet.iter_rows(min_row=3, values_only=True)] == labels

    page.goto(more + "/overview/")
    with page.expect_download() as lines_download:
        page.click("[data-download=lines-csv]")
    assert lines_download.value.suggested_filename.startswith("overview-business-lines")
    text = io.StringIO(open(lines_download.value.path(), encoding="utf-8-sig").read())
    assert [r[0] for r in list(csv.reader(text))[1:]] == column(page, "#lines", "label")


def test_requests_are_found_by_record_request_and_conversation_id(open_as: Any, more: str) -> None:  # noqa: F811
    page = open_as(person("fay", "finance"))
    page.goto(more + "/waste/requests/")
    ids = column(page, "#requests", "record_id")
    engine_id = next(i for i in ids if i.startswith("chatcmpl-"))

    for searched, expected in (
        ("req-repeat", ["req-repeat"]),
        (engine_id.removeprefix("chatcmpl-"), [engine_id]),  # the request id vLLM was given
        ("conv-7", ["req-plan-again", "req-act-2", "req-act", "req-plan"]),
    ):
        page.fill("#find input[name=q]", searched)
        page.click("#find button")
        page.wait_for_selector("#searched")
        assert column(page, "#requests", "record_id") == expected, searched

    costs = page.locator("#requests thead th[data-sort^=cost_]")
    assert costs.count() == 1
    costs.locator("a").click()
    page.wait_for_url("**sort=-cost_**")
    assert "q=conv-7" in page.url  # the search stays with the order
    shown = amounts(page, "#requests tbody td.cost")
    assert costliest_first(shown)
    assert amounts(page, "#requests tfoot .cost-total") == [sum(c for c in shown if c is not None)]
    shot(page, "requests-found-by-conversation")


def test_a_saved_view_is_kept_and_opens_for_a_colleague_through_its_link(open_as: Any, more: str) -> None:  # noqa: F811
    page = open_as(person("eve", "engineer"))
    page.goto(more + "/waste/?group=feature&sort=label")
    page.click("#saved-views summary")
    page.fill("#save-view input[name=name]", "features A to Z")
    page.click("#save-view button")
    page.wait_for_selector("#saved-views a[data-view='features A to Z']")
    assert "sort=label" in page.url and "group=feature" in page.url
    share = page.locator("#saved-views a.share").get_attribute("href")
    assert share is not None

    colleague = open_as(person("vic", "viewer"))
    colleague.goto(more + share)
    colleague.wait_for_selector("#grouped[data-group=feature]")
    assert "sort=label" in colleague.url
    assert colleague.locator("#grouped th[data-sort=label]").get_attribute("aria-sort") == "ascending"
