"""Building the pages' daily rollups (apps.dashboards.models) from the hourly ones, and which
days of a window they can serve.

A day is rebuilt in one transaction that first takes the day's advisory lock exclusively: the
triggers on the hourly tables hold it shared from the statement that changed the day until
their commit, so the rebuild starts only once every writer of the day has committed, reads
all of them, and any writer after it marks the day stale again."""

from __future__ import annotations

import logging
import time
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction

log = logging.getLogger(__name__)

DAY = timedelta(days=1)
# The advisory lock namespace the triggers use (migrations/dashboards/0001_initial.py).
LOCK_SPACE = 1684108147
EPOCH = date(1970, 1, 1)

_REBUILD = """
DELETE FROM dashboards_staleday WHERE day = %(day)s;
DELETE FROM dashboards_dailyclass WHERE day = %(start)s;
DELETE FROM dashboards_dailycost WHERE day = %(start)s;
INSERT INTO dashboards_dailyclass (day, model_id, dims_id, business_line, reason_id, component, tokens)
SELECT %(start)s, c.model_id, c.dims_id, d.business_line, c.reason_id, c.component, c.tokens
FROM (
    SELECT model_id, dims_id, reason_id, component, sum(tokens)::bigint AS tokens
    FROM classification_hourlyclass WHERE hour >= %(start)s AND hour < %(end)s
    GROUP BY 1, 2, 3, 4
) c JOIN ingest_dimset d ON d.id = c.dims_id
WHERE c.tokens <> 0;
INSERT INTO dashboards_dailycost
    (day, model_id, dims_id, business_line, reason_id, component, currency, tokens, cost)
SELECT %(start)s, c.model_id, c.dims_id, d.business_line, c.reason_id, c.component, c.currency, c.tokens, c.cost
FROM (
    SELECT model_id, dims_id, reason_id, component, currency, sum(tokens)::bigint AS tokens, sum(cost) AS cost
    FROM pricing_hourlycost WHERE hour >= %(start)s AND hour < %(end)s
    GROUP BY 1, 2, 3, 4, 5
) c JOIN ingest_dimset d ON d.id = c.dims_id;
DELETE FROM dashboards_dailylineclass WHERE day = %(start)s;
DELETE FROM dashboards_dailylinecost WHERE day = %(start)s;
INSERT INTO dashboards_dailylineclass (day, model_id, business_line, reason_id, component, tokens)
SELECT day, model_id, business_line, reason_id, component, sum(tokens)::bigint
FROM dashboards_dailyclass WHERE day = %(start)s GROUP BY 1, 2, 3, 4, 5;
INSERT INTO dashboards_dailylinecost (day, model_id, business_line, reason_id, component, currency, tokens, cost)
SELECT day, model_id, business_line, reason_id, component, currency, sum(tokens)::bigint, sum(cost)
FROM dashboards_dailycost WHERE day = %(start)s GROUP BY 1, 2, 3, 4, 5, 6;
"""


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def refresh_day(day: date) -> None:
    """Rebuild one UTC day's daily rows from the hourly rollups and clear its stale marks."""
    start = midnight(day)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_SPACE, (day - EPOCH).days])
        for statement in _REBUILD.split(";")[:-1]:
            cursor.execute(statement, {"day": day, "start": start, "end": start + DAY})


def stale_days() -> list[date]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT day FROM dashboards_staleday ORDER BY day")
        return [row[0] for row in cursor.fetchall()]


def refresh_stale(*, seconds: float | None = None, skip_today: bool = False) -> list[date]:
    """Rebuild every stale day, oldest first (or until `seconds` have passed); returns those done.
    `skip_today` leaves the UTC day in progress to the readers' hourly path, which it is on
    anyway while records keep arriving."""
    started, done = time.monotonic(), []
    today = datetime.now(UTC).date()
    for day in stale_days():
        if skip_today and day >= today:
            continue
        if seconds is not None and time.monotonic() - started > seconds:
            break
        refresh_day(day)
        done.append(day)
    if done:
        log.info("daily rollups rebuilt for %d day(s): %s .. %s", len(done), done[0], done[-1])
    return done


def split_window(start: datetime, end: datetime) -> tuple[list[datetime], list[tuple[datetime, datetime]]]:
    """The window [start, end) as (midnights of the whole days the daily rows can serve, the
    [from, to) ranges left to the hourly rows: the partial days at its edges and stale days)."""
    first = midnight(start.astimezone(UTC).date())
    if first < start:
        first += DAY
    last = midnight(end.astimezone(UTC).date())
    if last <= first:
        return [], [(start, end)]
    stale = set(_stale_between(first.date(), last.date()))
    days, hourly = [], []
    if start < first:
        hourly.append((start, first))
    day = first
    while day < last:
        if day.date() in stale:
            if hourly and hourly[-1][1] == day:
                hourly[-1] = (hourly[-1][0], day + DAY)
            else:
                hourly.append((day, day + DAY))
        else:
            days.append(day)
        day += DAY
    if last < end:
        if hourly and hourly[-1][1] == last:
            hourly[-1] = (hourly[-1][0], end)
        else:
            hourly.append((last, end))
    return days, hourly


def day_runs(days: list[datetime]) -> list[tuple[datetime, datetime]]:
    """Sorted midnights as [from, to) ranges of consecutive days: a range test per row instead
    of a comparison with every day of the window."""
    runs: list[tuple[datetime, datetime]] = []
    for day in days:
        if runs and runs[-1][1] == day:
            runs[-1] = (runs[-1][0], day + DAY)
        else:
            runs.append((day, day + DAY))
    return runs


def _stale_between(first: date, last: date) -> list[date]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT day FROM dashboards_staleday WHERE day >= %s AND day < %s", [first, last])
        return [row[0] for row in cursor.fetchall()]
