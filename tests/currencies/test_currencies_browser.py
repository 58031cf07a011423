"""The exchange rates page in a real browser (Playwright + Debian's chromium, as
tests/reconciliation/test_reconciliation_browser.py): a finance user sees the day waiting for a USD
rate, uploads a rates CSV with a bad row and reads its reason (nothing imported), enters the
missing rate, and once accrual runs the day is booked and no longer waiting. Screenshot:
test-artifacts/rates.png."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.currencies.models import ExchangeRate
from apps.ledger.models import JournalLine
from apps.ledger.services.accrual import month_accrue
from tests.currencies.test_currencies import usd_usage_build
from tests.dashboards.test_browser import browser, person, shot, sign_in
from tests.ledger.helpers import OCT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.books_in("UTC")]
__all__ = ["browser"]  # the fixture, shared


@pytest.fixture
def site(live_server: Any, truncate_records: None, collector: Any) -> str:
    usd_usage_build(collector)
    month_accrue(month=OCT)
    return str(live_server.url)


@pytest.fixture
def page(browser: Any, site: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1300, "height": 900}, locale="en-US")
    yield sign_in(context, site, person("rita", "finance"), path="/finance/rates/")
    context.close()


def test_a_finance_user_fixes_a_missing_rate_on_the_rates_page(page: Any, tmp_path: Path) -> None:
    assert "2026-10-05" in page.inner_text("#missing") and "3.07 USD" in page.inner_text("#missing")
    bad = tmp_path / "rates.csv"
    bad.write_text("date,currency,rate,source\n2026-10-05,USD,7.0,PBOC\n2026-10-06,USD,-1,PBOC\n")

    page.set_input_files("#enter input[name=file]", str(bad))
    page.click("#enter button[value=import]")
    page.wait_for_selector("#messages")

    assert "row 3: the rate must be a positive number, got '-1'" in page.inner_text("#messages .error")
    assert not ExchangeRate.objects.filter(day="2026-10-05").exists()

    page.fill("#enter input[name=day]", "2026-10-05")
    page.select_option("#enter select[name=currency]", "USD")
    page.fill("#enter input[name=rate]", "7.0")
    page.fill("#enter input[name=source]", "PBOC central parity")
    page.click("#enter button[value=set]")
    page.wait_for_selector("#messages .success")
    month_accrue(month=OCT)  # what the accrual job does next
    page.reload()

    assert "None" in page.inner_text("#missing")
    assert "7" in page.inner_text("#rates") and "PBOC central parity" in page.inner_text("#rates")
    assert JournalLine.objects.filter(day="2026-10-05", original_currency="USD", rate=7).exists()
    shot(page, "rates")
