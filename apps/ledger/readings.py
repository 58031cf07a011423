"""Readings of whole accounting days kept while the day's rows stand (ledger.DayReading).

Some figures sum a month of hourly rows at every view: the waste reconciliation (1.3 million
priced rows at 10 million records a month) and the tokens figure (every classified and priced
row). A day's reading is kept when the day can no longer change unseen, and read back while its
key is the day's key now:

- the day has ended (its pool hours are allocated: pricing's `pool_ready_before`);
- the journal holds it as its priced rows stand (`booked_days`: the fingerprint it was booked
  from, the count and largest id of its priced and idle rows, is its fingerprint now; pricing
  rewrites an hour by delete and insert, so any change to them moves it);
- none of its hours waits to be priced again (a change to the class rollup marks its hour,
  DirtyHour, in the same transaction; pricing then rewrites the hour's priced and unpriced rows,
  which moves the fingerprint or the unpriced hours' count and largest id, both in the key).

The key is the zone, the accrual fingerprint (which holds the mapping's config version and the
day's bounds) and the unpriced hours' count and largest id. A reading is kept only if the day's
key is the same after it was read as before, so a change while it was read is not kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.db import transaction

from apps.common.buckets import day_end, day_start
from apps.common.composed import SQL, Composable, table, text
from apps.common.replica import read_connection
from apps.ledger.models import AccrualDay, DayReading
from apps.ledger.services.accrual import booked_days
from apps.pricing.models import DirtyHour, UnpricedHour
from apps.pricing.services import pool_ready_before

Hours = list[tuple[datetime, datetime]]

# A day's marks and unpriced hours, for its key.
_DAY_STATE_SQL = text(
    SQL(
        """
SELECT 'dirty', (hour AT TIME ZONE %s)::date, 0, 0 FROM {dirty} WHERE hour >= %s AND hour < %s
UNION ALL
SELECT 'unpriced', (hour AT TIME ZONE %s)::date, count(*), max(id) FROM {unpriced}
WHERE hour >= %s AND hour < %s GROUP BY 2
"""
    ).format(dirty=table(DirtyHour), unpriced=table(UnpricedHour))
)


def day_keys(days: list[date], zone: ZoneInfo) -> dict[date, str]:
    """Per day of `days` (ascending, days of `zone`) whose reading can be kept: its key now."""
    ready = pool_ready_before()
    booked = sorted(booked_days([d for d in days if day_end(d, zone) <= ready]))
    if not booked:
        return {}
    start, end = day_start(booked[0], zone), day_end(booked[-1], zone)
    dirty: set[date] = set()
    unpriced: dict[date, str] = {}
    with read_connection().cursor() as cursor:
        cursor.execute(_DAY_STATE_SQL, [zone.key, start, end, zone.key, start, end])
        for kind, day, count, last in cursor:
            if kind == "dirty":
                dirty.add(day)
            else:
                unpriced[day] = f"{count}:{last}"
    prints = dict(AccrualDay.objects.filter(day__in=booked).values_list("day", "fingerprint"))
    return {d: f"{zone.key}|{prints[d]}|{unpriced.get(d, '-')}" for d in booked if d not in dirty and d in prints}


def day_runs(days: list[date], zone: ZoneInfo) -> Hours:
    """The hours of `days` (ascending), a range per run of consecutive days."""
    runs: Hours = []
    for day in days:
        if runs and runs[-1][1] == day_start(day, zone):
            runs[-1] = (runs[-1][0], day_end(day, zone))
        else:
            runs.append((day_start(day, zone), day_end(day, zone)))
    return runs


def hours_where(column: Composable, hours: Hours) -> tuple[Composable, list[datetime]]:
    """A WHERE condition (without the keyword) for `column` in one of the ranges `hours`."""
    one = SQL("({column} >= %s AND {column} < %s)").format(column=column)
    return SQL(" OR ").join([one] * len(hours)), [bound for pair in hours for bound in pair]


def day_readings(
    kind: str, days: list[date], zone: ZoneInfo, read: Callable[[Hours], dict[date, Any]], empty: Any
) -> dict[date, Any]:
    """Per day of `days` (ascending, whole days of `zone`), its reading of `kind`: the kept ones
    read back, the others by `read` (given the hours of the days not kept, it returns the JSON
    reading of each day that has rows; a day without is `empty`), of which those that qualify are
    kept."""
    if not days:
        return {}
    keys = day_keys(days, zone)
    kept = {r.day: r.rows for r in DayReading.objects.filter(kind=kind, day__in=list(keys)) if r.key == keys[r.day]}
    missing = [d for d in days if d not in kept]
    fresh = read(day_runs(missing, zone)) if missing else {}
    found = {**{d: fresh.get(d, empty) for d in missing}, **kept}
    new = [d for d in missing if d in keys]
    if new:
        now = day_keys(new, zone)
        keep = [d for d in new if now.get(d) == keys[d]]
        with transaction.atomic():
            DayReading.objects.filter(kind=kind, day__in=keep).delete()
            DayReading.objects.bulk_create(
                [DayReading(day=d, kind=kind, key=keys[d], rows=found[d]) for d in keep], ignore_conflicts=True
            )
    return found
