"""The reconciliation page in a real browser (Playwright + Debian's chromium, as
tests/finance/test_finance_browser.py): from the finance page, a finance user uploads the
month's bill and sees each planted difference with its figures, proposes the adjusting entry, a
second finance user approves it, and every difference shows as explained. Screenshots go to
test-artifacts/ (reconciliation.png, reconciliation-zh-hans.png)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboards.test_browser import browser, person, shot, sign_in
from tests.reconciliation.test_reconciliation import hosted, hosted_bill, platform_build

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.books_in("UTC")]
__all__ = ["browser"]  # the fixture, shared


@pytest.fixture
def site(live_server: Any, truncate_records: None, collector: Any) -> str:
    platform_build(collector)
    hosted()
    return str(live_server.url)


@pytest.fixture
def login(browser: Any, site: str) -> Iterator[Any]:
    contexts: list[Any] = []

    def open_as(username: str, path: str, locale: str = "en-US") -> Any:
        context = browser.new_context(viewport={"width": 1500, "height": 900}, locale=locale)
        contexts.append(context)
        return sign_in(context, site, username, path=path)

    yield open_as
    for context in contexts:
        context.close()


def differences(page: Any) -> list[dict[str, str]]:
    header = page.eval_on_selector_all("#table-differences thead th", "ths => ths.map(th => th.innerText.trim())")
    rows = page.eval_on_selector_all(
        "#table-differences tbody tr", "trs => trs.map(tr => [...tr.children].map(c => c.innerText.trim()))"
    )
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_a_finance_user_uploads_a_bill_and_sees_its_differences(login: Any) -> None:
    page = login(person("fiona", "finance"), "/finance/?month=2026-10")
    page.click("#reconciliation-link")
    page.wait_for_selector("#upload")
    page.set_input_files(
        "input[name=file]", files=[{"name": "openai-2026-10.csv", "mimeType": "text/csv", "buffer": hosted_bill()}]
    )
    page.click("button[value=import]")
    page.wait_for_selector("#messages")
    assert "7 rows imported" in page.inner_text("#messages")

    found = {(r["Difference"], r["Day"], r["Model"], r["Key or project"]): r for r in differences(page)}
    assert sorted(found) == [
        ("amount mismatch", "2026-10-06", "gpt-4o", "beta"),
        ("only in the platform", "2026-10-05", "gpt-4o-mini", "beta"),
        ("only on the bill", "2026-10-08", "gpt-4o", "alpha"),
        ("token mismatch", "2026-10-07", "gpt-4o-mini", "alpha"),
    ]
    amount = found[("amount mismatch", "2026-10-06", "gpt-4o", "beta")]
    assert (amount["Bill"], amount["Platform"], amount["Bill minus platform"]) == ("8.07", "3.07", "5.00")
    tokens = found[("token mismatch", "2026-10-07", "gpt-4o-mini", "alpha")]
    assert (tokens["Bill tokens"], tokens["Platform tokens"], tokens["Token difference"]) == ("6,380", "1,380", "5,000")
    shot(page, "reconciliation")

    page.click("button[value=propose]")
    page.wait_for_selector("#table-adjustments tr[data-state=proposed]")
    approver = login(person("felix", "finance"), "/finance/reconciliation/?month=2026-10")
    approver.click("button[value=approve]")
    approver.wait_for_selector("#table-adjustments tr[data-state=posted]")
    assert {r["State"] for r in differences(approver)} == {"explained by an adjustment"}

    chinese = login("felix", "/finance/reconciliation/?month=2026-10", locale="zh-CN")
    assert "账单对账" in chinese.inner_text("h1") and "已由调整分录解释" in chinese.inner_text("#table-differences")
    shot(chinese, "reconciliation-zh-hans")
