"""The pages' daily rollups: built from the hourly ones, used only for whole days that are
current, and never behind them (a change marks its day stale at once)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from apps.dashboards import selectors
from apps.dashboards.filters import Filters
from apps.dashboards.models import BuiltDay, DailyClass, DailyCost, StaleDay
from apps.dashboards.rollup import refresh_day, refresh_stale, split_window
from apps.pricing.services import hours_price, price_set
from tests.conftest import traffic_at
from tests.factories import record

NOW = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
DAY0 = (NOW - timedelta(days=3)).replace(hour=0)  # midnight three days ago: a whole day in a 7-day window


def _records() -> list[dict[str, Any]]:
    moments = ((0, 1), (0, 13), (1, 5), (1, 23))
    return [found for day, hour in moments for found in traffic_at(DAY0 + timedelta(days=day, hours=hour, minutes=5))]


@pytest.fixture
def days(collector: Any) -> None:
    response = collector.send(_records())
    assert response.json()["accepted"] == 16, response.content
    price_set(
        model_pattern="*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=DAY0 - timedelta(days=1),
    )
    hours_price(start=DAY0, end=DAY0 + timedelta(days=2))


WINDOW = Filters(NOW - timedelta(days=7) + timedelta(hours=1), NOW + timedelta(hours=1))
FILTERS = [
    WINDOW,
    Filters(WINDOW.start, WINDOW.end, token_class="waste"),
    Filters(WINDOW.start, WINDOW.end, token_class="waste", reason="waste.timeout"),
    Filters(WINDOW.start, WINDOW.end, token_class="waste", model="llama-3-70b"),
    Filters(WINDOW.start, WINDOW.end, dims={"business_line": "search"}),
    Filters(WINDOW.start, WINDOW.end, dims={"business_line": "support", "feature": "faq"}),
    Filters(WINDOW.start, WINDOW.end, dims={"step": "plan"}),
    Filters(DAY0, DAY0 + timedelta(days=1)),  # one whole day: hourly granularity
    Filters(DAY0, DAY0 + timedelta(days=2), token_class="waste", dims={"business_line": "search"}),
    Filters(DAY0 + timedelta(hours=5), DAY0 + timedelta(days=1, hours=20), dims={"feature": "rank"}),
]


def _everything(flt: Filters, lines: list[str] | None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "health": selectors.health(flt=flt, lines=lines),
        "series": selectors.class_series(flt=flt, lines=lines),
        "spend": selectors.spend(flt=flt, lines=lines),
    }
    for group in ("class", "reason", "model", "business_line", "feature", "step"):
        found[group] = selectors.breakdown(flt=flt, lines=lines, group=group, money=True)
    together = selectors.overview(flt=flt, lines=lines, money=True)
    assert together.health == found["health"] and together.series == found["series"]
    assert together.spend == found["spend"] and together.lines == found["business_line"][:20]
    return found


@pytest.mark.parametrize("lines", [None, ["support"]])
def test_the_pages_read_the_same_from_the_daily_rollups_as_from_the_hourly_ones(days, lines) -> None:
    before = [_everything(flt, lines) for flt in FILTERS]
    assert StaleDay.objects.exists()

    refresh_stale()
    with CaptureQueriesContext(connection) as queries:
        after = [_everything(flt, lines) for flt in FILTERS]

    assert not StaleDay.objects.exists()
    assert DailyClass.objects.count() > 0 and DailyCost.objects.count() > 0
    for table in ("dailyclass", "dailycost", "dailylineclass", "dailylinecost", "hourlylineclass"):
        assert any(f'"dashboards_{table}" ' in q["sql"] for q in queries.captured_queries), table
    assert after == before
    assert before[0]["health"].total > 0 and before[0]["spend"]


def test_the_daily_rows_sum_to_the_hourly_rows_of_their_day(days) -> None:
    refresh_stale()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT sum(tokens) FROM classification_hourlyclass), (SELECT sum(tokens) FROM "
            "dashboards_dailyclass), (SELECT sum(tokens) FROM dashboards_dailylineclass), "
            "(SELECT sum(cost) FROM pricing_hourlycost), (SELECT sum(cost) FROM dashboards_dailycost), "
            "(SELECT sum(cost) FROM dashboards_dailylinecost), (SELECT count(DISTINCT day) FROM dashboards_dailyclass)"
        )
        hourly_tokens, daily_tokens, line_tokens, hourly_cost, daily_cost, line_cost, day_count = cursor.fetchone()
    assert daily_tokens == line_tokens == hourly_tokens > 0
    assert daily_cost == line_cost == hourly_cost > 0
    assert day_count == 2


def test_a_change_after_the_refresh_shows_at_once(days, collector) -> None:
    refresh_stale()
    total = selectors.health(flt=WINDOW, lines=None).total

    late = record(ts=(DAY0 + timedelta(hours=7)).isoformat(), prompt_hash=None)
    assert collector.send([late]).json()["accepted"] == 1

    assert StaleDay.objects.filter(day=DAY0.date()).exists()
    assert selectors.health(flt=WINDOW, lines=None).total == total + 1200 + 180
    refresh_stale()
    assert selectors.health(flt=WINDOW, lines=None).total == total + 1200 + 180


def _built(*days: int, through: dict[int, datetime] | None = None) -> None:
    for d in days:
        BuiltDay.objects.create(
            day=datetime(2026, 11, d).date(), through=(through or {}).get(d, datetime(2026, 11, d + 1, tzinfo=UTC))
        )


@pytest.mark.django_db
def test_the_window_takes_whole_built_days_from_the_daily_rows() -> None:
    _built(1, 2, 3, 4, 5)
    start = datetime(2026, 11, 1, 5, tzinfo=UTC)
    end = datetime(2026, 11, 5, 7, tzinfo=UTC)

    days, hours, _built_ranges = split_window(start, end)

    assert days == [datetime(2026, 11, d, tzinfo=UTC) for d in (2, 3, 4)]
    assert hours == [(start, datetime(2026, 11, 2, tzinfo=UTC)), (datetime(2026, 11, 5, tzinfo=UTC), end)]
    assert split_window(start, start + timedelta(hours=20)) == ([], [(start, start + timedelta(hours=20))], [])


@pytest.mark.django_db
def test_a_day_with_a_changed_hour_before_its_cutoff_or_not_built_is_read_from_the_hourly_rows() -> None:
    _built(1, 2, 3, 5)  # the 4th never built
    StaleDay.objects.create(day=datetime(2026, 11, 3).date(), hour=datetime(2026, 11, 3, 5, tzinfo=UTC))

    days, hours, _built_ranges = split_window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 6, tzinfo=UTC))

    assert days == [datetime(2026, 11, d, tzinfo=UTC) for d in (1, 2, 5)]
    assert hours == [(datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC))]


@pytest.mark.django_db
def test_the_day_in_progress_serves_its_built_hours_and_reads_the_rest_by_the_hour() -> None:
    cutoff = datetime(2026, 11, 5, 14, tzinfo=UTC)
    _built(4, 5, through={5: cutoff})
    # The hour in progress keeps being written: its marks do not touch the hours before the cutoff.
    StaleDay.objects.create(day=cutoff.date(), hour=cutoff)

    days, hours, built = split_window(datetime(2026, 11, 4, tzinfo=UTC), datetime(2026, 11, 5, 16, tzinfo=UTC))

    assert days == [datetime(2026, 11, 4, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC)]
    assert hours == [(cutoff, datetime(2026, 11, 5, 16, tzinfo=UTC))]
    assert built == [
        (datetime(2026, 11, 4, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC)),
        (datetime(2026, 11, 5, tzinfo=UTC), cutoff),
    ]
    # A window that ends before the cutoff cannot use the day's rows.
    assert split_window(datetime(2026, 11, 5, tzinfo=UTC), datetime(2026, 11, 5, 10, tzinfo=UTC))[0] == []


def test_the_day_in_progress_is_built_up_to_the_hour_in_progress_and_stays_current(collector) -> None:
    now = datetime.now(UTC)
    earlier = record(ts=(now - timedelta(hours=3)).isoformat(), prompt_hash=None)
    assert collector.send([earlier]).json()["accepted"] == 1
    flt = Filters(now.replace(minute=0, second=0, microsecond=0) - timedelta(days=6, hours=now.hour),
                  now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1))  # fmt: skip
    before = selectors.health(flt=flt, lines=None).total

    refresh_stale()
    built = BuiltDay.objects.get(day=(now - timedelta(hours=3)).date())
    assert built.through <= now.replace(minute=0, second=0, microsecond=0)
    assert selectors.health(flt=flt, lines=None).total == before == 1200 + 180

    # In the hour in progress (after what the build covered), whatever minute of the hour it is.
    sent = datetime.now(UTC)
    latest = record(ts=max(sent - timedelta(seconds=1), sent.replace(minute=0, second=0, microsecond=0)).isoformat(),
                    prompt_hash=None)  # fmt: skip
    assert collector.send([latest]).json()["accepted"] == 1
    with CaptureQueriesContext(connection) as queries:
        assert selectors.health(flt=flt, lines=None).total == 2 * (1200 + 180)
    assert any("dashboards_dailylineclass" in q["sql"] for q in queries.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_a_refresh_waits_for_a_writer_in_flight_and_sees_its_rows(days) -> None:
    """A writer's uncommitted hourly change holds its day: the refresh starts after the commit,
    so the daily rows include it (and the day is not left marked current without it)."""
    refresh_stale()
    day = DAY0.date()
    writer = connections.create_connection("default")
    writer.connect()
    try:
        with writer.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(
                "UPDATE classification_hourlyclass SET tokens = tokens + 1000 WHERE ctid = "
                "(SELECT ctid FROM classification_hourlyclass WHERE hour >= %s AND hour < %s LIMIT 1)",
                [DAY0, DAY0 + timedelta(days=1)],
            )
            done = threading.Event()

            def refresh() -> None:
                try:
                    refresh_day(day)
                finally:
                    connection.close()
                    done.set()

            thread = threading.Thread(target=refresh)
            thread.start()
            time.sleep(0.5)
            assert not done.is_set(), "the refresh did not wait for the writer"
            cursor.execute("COMMIT")
            thread.join(10)
            assert done.is_set()
    finally:
        writer.close()

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT sum(tokens) FROM classification_hourlyclass WHERE hour >= %s AND hour < %s), "
            "(SELECT sum(tokens) FROM dashboards_dailyclass WHERE day = %s)",
            [DAY0, DAY0 + timedelta(days=1), DAY0],
        )
        hourly, daily = cursor.fetchone()
    assert daily == hourly
    assert not StaleDay.objects.filter(day=day).exists()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ingest_record")
