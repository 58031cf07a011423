"""Building the pages' daily rollups (apps.dashboards.models) from the hourly ones, and which
days of a window they can serve.

A day is built from its hours before a cutoff: its end, or for the day in progress the hour in
progress, which keeps being written. It is rebuilt in one transaction that first takes the
day's advisory lock exclusively: the triggers on the hourly tables hold it shared from the
statement that changed an hour of the day until their commit, so the rebuild starts only once
every writer of the day has committed and reads all of them, and any writer after it marks its
hour again. A day's daily rows serve a page until an hour before their cutoff is marked; the
hours after it come from the hourly rows."""

from __future__ import annotations

import logging
import time
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

from django.db import connection, transaction

from apps.classification.models import HourlyClass
from apps.dashboards.models import (
    BuiltDay,
    DailyClass,
    DailyCost,
    DailyLineClass,
    DailyLineCost,
    HourlyLineClass,
    StaleDay,
)
from apps.ingest.models import DimSet
from apps.pricing.models import HourlyCost

log = logging.getLogger(__name__)

DAY = timedelta(days=1)
# The advisory lock namespace the triggers use (migrations/dashboards/0001_initial.py).
LOCK_SPACE = 1684108147
EPOCH = date(1970, 1, 1)

_REBUILD = f"""
DELETE FROM {StaleDay._meta.db_table} WHERE day = %(day)s AND hour < %(end)s;
DELETE FROM {DailyClass._meta.db_table} WHERE day = %(start)s;
DELETE FROM {DailyCost._meta.db_table} WHERE day = %(start)s;
INSERT INTO {DailyClass._meta.db_table} (day, model_id, dims_id, business_line, reason_id, component, tokens)
SELECT %(start)s, c.model_id, c.dims_id, d.business_line, c.reason_id, c.component, c.tokens
FROM (
    SELECT model_id, dims_id, reason_id, component, sum(tokens)::bigint AS tokens
    FROM {HourlyClass._meta.db_table} WHERE hour >= %(start)s AND hour < %(end)s
    GROUP BY 1, 2, 3, 4
) c JOIN {DimSet._meta.db_table} d ON d.id = c.dims_id
WHERE c.tokens <> 0;
INSERT INTO {DailyCost._meta.db_table}
    (day, model_id, dims_id, business_line, reason_id, component, currency, tokens, cost)
SELECT %(start)s, c.model_id, c.dims_id, d.business_line, c.reason_id, c.component, c.currency, c.tokens, c.cost
FROM (
    SELECT model_id, dims_id, reason_id, component, currency, sum(tokens)::bigint AS tokens, sum(cost) AS cost
    FROM {HourlyCost._meta.db_table} WHERE hour >= %(start)s AND hour < %(end)s
    GROUP BY 1, 2, 3, 4, 5
) c JOIN {DimSet._meta.db_table} d ON d.id = c.dims_id;
DELETE FROM {DailyLineClass._meta.db_table} WHERE day = %(start)s;
DELETE FROM {DailyLineCost._meta.db_table} WHERE day = %(start)s;
INSERT INTO {DailyLineClass._meta.db_table} (day, model_id, business_line, reason_id, component, tokens)
SELECT day, model_id, business_line, reason_id, component, sum(tokens)::bigint
FROM {DailyClass._meta.db_table} WHERE day = %(start)s GROUP BY 1, 2, 3, 4, 5;
INSERT INTO {DailyLineCost._meta.db_table}
    (day, model_id, business_line, reason_id, component, currency, tokens, cost)
SELECT day, model_id, business_line, reason_id, component, currency, sum(tokens)::bigint, sum(cost)
FROM {DailyCost._meta.db_table} WHERE day = %(start)s GROUP BY 1, 2, 3, 4, 5, 6;
DELETE FROM {HourlyLineClass._meta.db_table} WHERE hour >= %(start)s AND hour < %(day_end)s;
INSERT INTO {HourlyLineClass._meta.db_table} (hour, model_id, business_line, reason_id, component, tokens)
SELECT c.hour, c.model_id, d.business_line, c.reason_id, c.component, sum(c.tokens)::bigint
FROM {HourlyClass._meta.db_table} c JOIN {DimSet._meta.db_table} d ON d.id = c.dims_id
WHERE c.hour >= %(start)s AND c.hour < %(end)s
GROUP BY 1, 2, 3, 4, 5 HAVING sum(c.tokens) <> 0;
INSERT INTO {BuiltDay._meta.db_table} (day, through) VALUES (%(day)s, %(end)s)
ON CONFLICT (day) DO UPDATE SET through = excluded.through;
"""


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def hour_now() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def refresh_day(day: date, *, now: datetime | None = None) -> bool:
    """Rebuild one UTC day's daily rows from its hourly rows before the hour in progress (all of
    them for a day that has ended) and clear the marks of those hours. False for a day not begun."""
    start = midnight(day)
    end = min(start + DAY, now or hour_now())
    if end <= start:
        return False
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_SPACE, (day - EPOCH).days])
        for statement in _REBUILD.split(";")[:-1]:
            cursor.execute(statement, {"day": day, "start": start, "end": end, "day_end": start + DAY})
    return True


def stale_days(*, now: datetime | None = None) -> list[date]:
    """Days with a changed hour that has ended: what the refresh job rebuilds."""
    with connection.cursor() as cursor:
        sql = f"SELECT DISTINCT day FROM {StaleDay._meta.db_table} WHERE hour < %s ORDER BY day"
        cursor.execute(sql, [now or hour_now()])
        return [row[0] for row in cursor.fetchall()]


def refresh_stale(*, seconds: float | None = None) -> list[date]:
    """Rebuild every day with a changed hour that has ended, oldest first (or until `seconds` have
    passed); returns those done. The day in progress is rebuilt once an hour as its hours end."""
    started, done = time.monotonic(), []
    now = hour_now()
    for day in stale_days(now=now):
        if seconds is not None and time.monotonic() - started > seconds:
            break
        if refresh_day(day, now=now):
            done.append(day)
    if done:
        log.info("daily rollups rebuilt for %d day(s): %s .. %s", len(done), done[0], done[-1])
    return done


class Window(NamedTuple):
    days: list[datetime]  # midnights of the days whose daily rows serve the window
    hourly: list[tuple[datetime, datetime]]  # [from, to) ranges left to the hourly rollups
    built: list[tuple[datetime, datetime]]  # [from, to) ranges the built rows hold (days to their cutoffs)


def split_window(start: datetime, end: datetime) -> Window:
    """The window [start, end) as the days whose daily rows serve it and the ranges left to the
    hourly rows: a partial first day, days not built or with a changed hour before their cutoff,
    and the hours after a cutoff."""
    first = midnight(start.astimezone(UTC).date())
    if first < start:
        first += DAY
    if first >= end:
        return Window([], [(start, end)], [])
    built = _built_between(first.date(), (end - timedelta(microseconds=1)).astimezone(UTC).date())
    days: list[datetime] = []
    hourly: list[tuple[datetime, datetime]] = []
    covered: list[tuple[datetime, datetime]] = []

    def add(lo: datetime, hi: datetime) -> None:
        if lo >= hi:
            return
        if hourly and hourly[-1][1] == lo:
            hourly[-1] = (hourly[-1][0], hi)
        else:
            hourly.append((lo, hi))

    add(start, first)
    day = first
    while day < end:
        day_end = min(day + DAY, end)
        through = built.get(day.date())
        if through is None or through > day_end:
            add(day, day_end)
        else:
            days.append(day)
            covered.append((day, through))
            add(through, day_end)
        day += DAY
    return Window(days, hourly, covered)


def _built_between(first: date, last: date) -> dict[date, datetime]:
    """The days in [first, last] whose daily rows serve: built, with no hour before the cutoff changed since."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT b.day, b.through FROM {BuiltDay._meta.db_table} b WHERE b.day >= %s AND b.day <= %s "
            f"AND NOT EXISTS (SELECT 1 FROM {StaleDay._meta.db_table} s WHERE s.day = b.day AND s.hour < b.through)",
            [first, last],
        )
        return dict(cursor.fetchall())


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
