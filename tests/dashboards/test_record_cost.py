"""Cost on every record (issue 30, item 8): a record of a model a cost pool serves shows each
component's cost at the pool's rate for its hour, the rate the pricing job allocated the hour's
cost to its rows at, so the records of a row add up to what the row was booked; a record whose
hour is not priced yet says so instead of a cost."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest

from apps.classification.engine import COMPONENTS
from apps.common.buckets import hour_floor
from apps.dashboards.selectors import record_components
from apps.ingest.models import Record
from apps.pricing.models import HourlyCost, PoolIdleHour
from apps.pricing.services import hours_price
from tests import factories
from tests.conftest import login_as

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
UNPRICED = "\u2013"  # the cost cell of a component without one


def record_url(record: Record) -> str:
    return "/waste/record/?" + urlencode(
        {"ts": record.ts.isoformat(), "source": record.source_id, "key": record.record_key}
    )


@pytest.fixture
def pooled(collector: Any) -> datetime:
    """Three records of a pooled model in an hour that has ended, two of one line (one row per
    component), one of another; the hour priced. Returns the hour."""
    hour = hour_floor(datetime.now(UTC)) - 2 * HOUR
    factories.cost_pool(effective_from=hour - 24 * HOUR, gpus=1, cost_per_gpu_hour=Decimal("3.00"), capacity=10_000)
    records = [
        factories.record(ts=(hour + timedelta(minutes=m)).isoformat(), prompt_hash=None, dims=dims, **tokens)
        for m, dims, tokens in (
            (5, {"business_line": "support"}, {"tokens.prompt": 1200}),
            (17, {"business_line": "support"}, {"tokens.prompt": 3000, "tokens.completion": 411}),
            (40, {"business_line": "search"}, {"tokens.prompt": 800, "tokens.prompt_cached": 0}),
        )
    ]
    assert collector.send(records).json()["accepted"] == 3
    hours_price(start=hour, end=hour + HOUR)
    return hour


def test_a_pooled_records_components_cost_what_its_hours_rows_were_allocated(pooled: datetime) -> None:
    records = list(Record.objects.select_related("model", "dims").filter(ts__gte=pooled, ts__lt=pooled + HOUR))
    found = [record_components(record=r) for r in records]

    allocated = PoolIdleHour.objects.get(hour=pooled).allocated
    assert allocated > 0 and all(f.pool and f.pool_rate is not None and f.currency == "CNY" for f in found)
    assert all(c.cost is not None for f in found for c in f.rows)
    # Every record of the hour together: the hour's allocated cost, exactly.
    assert abs(sum((f.cost for f in found if f.cost is not None), Decimal(0)) - allocated) < Decimal("1e-12")
    # Each row of the hour: its records' component costs, to the cent the row was rounded to.
    by_row: dict[tuple[str, str], Decimal] = {}
    for record, components in zip(records, found, strict=True):
        for c in components.rows:
            key = (record.dims.business_line, c.name)
            by_row[key] = by_row.get(key, Decimal(0)) + (c.cost or 0)
    rows = HourlyCost.objects.filter(hour=pooled).values_list("dims__business_line", "component", "cost")
    assert len(rows) == 5  # support: cached, uncached, output; search (nothing cached): uncached, output
    for line, component, cost in rows:
        assert abs(by_row[(line, COMPONENTS[component])] - cost) < Decimal("0.01"), (line, component)


def test_the_record_page_shows_the_cost_by_component_and_the_pools_rate(pooled: datetime) -> None:
    record = Record.objects.filter(ts__gte=pooled, ts__lt=pooled + HOUR).order_by("ts").first()
    assert record is not None
    expected = record_components(record=record).cost
    page = login_as("finance").get(record_url(record)).content.decode()

    components = page[page.index('id="components"') :].split("</table>")[0]
    assert expected is not None and UNPRICED not in components
    assert f'data-figure="spend" data-value="{expected}" data-currency="CNY"' in components
    assert len(re.findall(r"\d\.\d{6} CNY", components)) >= 4  # each component, and the total
    note = page[page.index('id="pool-rate"') :].split("</p>")[0]
    assert "per million weighted tokens" in note and "the rate the hour's rows were booked at" in note
    chinese = login_as("finance").get(record_url(record), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "每百万加权词元" in chinese[chinese.index('id="pool-rate"') :].split("</p>")[0]


def test_a_record_whose_pool_hour_is_not_priced_yet_says_so(collector: Any) -> None:
    now = datetime.now(UTC)
    factories.cost_pool(effective_from=hour_floor(now) - 24 * HOUR)
    assert collector.send([factories.record(ts=now.isoformat(), prompt_hash=None)]).json()["accepted"] == 1
    hours_price(start=hour_floor(now), end=hour_floor(now) + HOUR)  # the hour has not ended: no allocation
    record = Record.objects.get()

    page = login_as("finance").get(record_url(record)).content.decode()
    chinese = login_as("finance").get(record_url(record), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert "is not priced yet" in page[page.index('id="pool-rate"') :].split("</p>")[0]
    assert 'id="record-cost"' not in page and UNPRICED in page[page.index('id="components"') :].split("</table>")[0]
    assert "尚未定价" in chinese[chinese.index('id="pool-rate"') :].split("</p>")[0]
    # An engineer (no money) sees the components without costs or rates.
    engineer = login_as("engineer").get(record_url(record)).content.decode()
    assert 'id="pool-rate"' not in engineer and 'id="components"' in engineer
