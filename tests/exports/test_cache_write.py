"""Prompt-cache writes from the record to the books and out: records with cache writes sent through
the collector API, priced at the book's cache-write price, booked exactly, and exported as FOCUS
1.4 rows of their own SKU price and meter."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum

from apps.classification.engine import CACHE_WRITE
from apps.ledger.models import JournalLine
from apps.ledger.services.accrual import month_accrue
from apps.pricing.models import HourlyCost, PriceVersion
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.conftest import Collector
from tests.exports.focus_conformance import cost_and_usage_violations
from tests.ledger.helpers import OCT, account, balanced, spend

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]

MODEL = "claude-sonnet"
# Per million: input 3, cache read 0.30, cache write 3.75 (1.25 x input), output 15.
PRICES = {"input": Decimal(3), "cached_input": Decimal("0.3"), "cache_write": Decimal("3.75"), "output": Decimal(15)}
# Per record: 100k uncached x 3 + 100k read x 0.3 + 200k written x 3.75 + 10k out x 15, per million.
PER_RECORD = Decimal("0.30") + Decimal("0.03") + Decimal("0.75") + Decimal("0.15")


def _october(collector: Collector) -> None:
    tokens = {"prompt": 400_000, "prompt_cached": 100_000, "prompt_cache_write": 200_000, "completion": 10_000}
    records = [
        factories.record(
            ts=datetime(2026, 10, day, 9, 30, tzinfo=UTC).isoformat(),
            model=MODEL,
            tokens=tokens,
            prompt_hash=None,
            dims={"business_line": "support"},
        )
        for day in (3, 4)
    ]
    response = collector.send(records, on_time=True)
    assert response.json()["accepted"] == 2, response.content
    price_set(model_pattern=MODEL, prices=PRICES, effective_from=datetime(2026, 9, 1, tzinfo=UTC))
    hours_price(start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 11, 1, tzinfo=UTC))
    month_accrue(month=OCT)


def test_cache_writes_are_priced_at_the_write_price_and_booked_exactly(collector: Collector) -> None:
    _october(collector)

    written = HourlyCost.objects.filter(component=CACHE_WRITE).aggregate(t=Sum("tokens"), c=Sum("cost"))
    assert (written["t"], written["c"]) == (400_000, Decimal("1.5"))  # 2 x 200k at 3.75 a million
    assert spend() == {("6401.01", "support"): 2 * PER_RECORD}  # effective and cache: the effective expense
    assert JournalLine.objects.filter(account=account("2241")).aggregate(c=Sum("credit"))["c"] == 2 * PER_RECORD
    assert balanced()


def test_cache_writes_are_exported_as_focus_1_4_rows_of_their_own_price(collector: Collector, as_role: Any) -> None:
    _october(collector)

    response = as_role("finance").get("/api/v1/exports/focus?period=2026-10")
    assert response.status_code == 200
    reader = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    rows = list(reader)

    assert cost_and_usage_violations(list(reader.fieldnames or ()), rows) == []
    assert sum(Decimal(r["BilledCost"]) for r in rows) == 2 * PER_RECORD
    version = PriceVersion.objects.get()
    [write] = {
        (r["SkuPriceId"], r["SkuMeter"], r["ListUnitPrice"], r["x_Reason"])
        for r in rows
        if r["x_TokenKind"] == "cache_write"
    }
    assert write == (f"{MODEL}/cache_write/pv{version.pk}", "Cache Write Input Tokens", "3.75", "effective.cache_write")
    assert sum(int(r["ConsumedQuantity"]) for r in rows if r["x_TokenKind"] == "cache_write") == 400_000
