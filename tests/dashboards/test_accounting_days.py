"""The pages' days are days of the accounting zone: the from/to filters and the series by day
put the last and first local half hours of a month on their own days, daily rollups built or not,
in Asia/Shanghai and in Asia/Kolkata (+05:30: its hours start at :30 past the UTC hour)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.test import RequestFactory

from apps.dashboards import selectors
from apps.dashboards.filters import filters_from
from apps.dashboards.rollup import refresh_stale
from tests.factories import record

NOW = datetime(2026, 12, 3, 4, tzinfo=UTC)


def _filters(**query: str) -> Any:
    return filters_from(RequestFactory().get("/", query), now=NOW)


def _by_period(**query: str) -> dict[datetime, int]:
    totals: dict[datetime, int] = defaultdict(int)
    for by_period in selectors.class_series(flt=_filters(**query), lines=None).values():
        for period, tokens in by_period.items():
            totals[period] += tokens
    return dict(totals)


# The zone, the last and first local stamps around 1 December, and its midnights of 30 November
# and 1 December in UTC.
ZONES = {
    "Asia/Shanghai": ("2026-11-30T23:30:00+08:00", "2026-12-01T00:30:00+08:00", (29, 16, 0), (30, 16, 0)),
    "Asia/Kolkata": ("2026-11-30T23:45:00+05:30", "2026-12-01T00:15:00+05:30", (29, 18, 30), (30, 18, 30)),
}


@pytest.fixture(params=list(ZONES))
def edge_records(request: pytest.FixtureRequest, collector: Any, settings: Any) -> tuple[datetime, datetime]:
    settings.ACCOUNTING_TZ = request.param
    late_ts, early_ts, first, second = ZONES[request.param]
    late = record(ts=late_ts, tokens={"prompt": 1000, "completion": 100}, prompt_hash="a" * 32)
    early = record(ts=early_ts, tokens={"prompt": 3000, "completion": 300}, prompt_hash="b" * 32)
    assert collector.send([late, early], on_time=True).json()["accepted"] == 2
    return datetime(2026, 11, *first, tzinfo=UTC), datetime(2026, 11, *second, tzinfo=UTC)


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize("built", [False, True])
def test_a_days_filter_holds_the_local_day(edge_records: tuple[datetime, datetime], built: bool) -> None:
    if built:
        refresh_stale()

    assert sum(_by_period(**{"from": "2026-11-30"}).values()) == 1100
    assert sum(_by_period(**{"from": "2026-12-01"}).values()) == 3300
    assert _filters(**{"from": "2026-12-01"}).params() == {"from": "2026-12-01", "to": "2026-12-01"}


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize("built", [False, True])
def test_the_series_by_day_groups_local_days(edge_records: tuple[datetime, datetime], built: bool) -> None:
    if built:
        refresh_stale()

    series = _by_period(range="7d")

    november_30, december_1 = edge_records
    assert series == {november_30: 1100, december_1: 3300}
    start = _filters(range="7d").start.astimezone(UTC)
    assert (start.hour, start.minute) == (november_30.hour, november_30.minute)  # a local midnight
