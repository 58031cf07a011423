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
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

from django.db import connection

from apps.classification.models import HourlyClass
from apps.common.buckets import hour_floor
from apps.common.composed import SQL, Composed, Identifier, Literal, col, commas, names, table, text
from apps.common.markrun import Clear, MarkConsumer, Read
from apps.common.rollup import Marks, MarkTrigger, Rollup
from apps.dashboards.models import (
    BuiltDay,
    DailyClass,
    DailyCost,
    DailyLineClass,
    DailyLineCost,
    HourlyLineClass,
    StaleDay,
)
from apps.ingest.queries import dims_join
from apps.pricing.models import HourlyCost

log = logging.getLogger(__name__)

DAY = timedelta(days=1)
# The advisory lock namespace the triggers use (STALE_TRIGGER).
LOCK_SPACE = 1684108147
EPOCH = date(1970, 1, 1)

# The pages' rollups, each declared once: summed from the class and cost rollups by day (with the
# business line of the dim set beside its id), then by business line alone, and the class rollup
# by business line and hour for the hours of the days built.
_DAY_KEY = ("day", "model_id", "dims_id", "business_line", "reason_id", "component")
_LINE_KEY = ("day", "model_id", "business_line", "reason_id", "component")
DAILY_CLASS = Rollup(DailyClass._meta.db_table, _DAY_KEY, ("tokens",), grain="day")
DAILY_COST = Rollup(DailyCost._meta.db_table, (*_DAY_KEY, "currency"), ("tokens", "cost"), grain="day")
DAILY_LINE_CLASS = Rollup(DailyLineClass._meta.db_table, _LINE_KEY, ("tokens",), grain="day")
DAILY_LINE_COST = Rollup(DailyLineCost._meta.db_table, (*_LINE_KEY, "currency"), ("tokens", "cost"), grain="day")
HOURLY_LINE_CLASS = Rollup(HourlyLineClass._meta.db_table, ("hour", *_LINE_KEY[1:]), ("tokens",))
# The marks of changed hours the triggers on the class and cost rollups write, holding the day's
# lock shared until the writer commits.
STALE = Marks(StaleDay._meta.db_table, "hour", day="day")
_HOURLY = (HourlyClass._meta.db_table, HourlyCost._meta.db_table)
STALE_TRIGGER = MarkTrigger(STALE, "dashboards_mark_stale", "dashboards_stale", _HOURLY, lock=LOCK_SPACE)
_HOURS = SQL("hour >= %(start)s AND hour < %(end)s")


def _summed(measure: str, alias: str | None = None) -> Composed:
    """A measure summed as the pages read it: tokens as bigint, money as it is."""
    column = col(alias, measure) if alias else Identifier(measure)
    return SQL("sum({})::bigint" if measure == "tokens" else "sum({})").format(column)


def _day_insert(target: Rollup, source: str, *, nonzero: bool) -> Composed:
    """The day's rows of `target` from the hourly rollup `source`: summed by the key first, then
    each row given its dim set's business line."""
    key = [name for name in target.key if name not in ("day", "business_line")]
    selected = [
        SQL("%(start)s") if name == "day" else col("d" if name == "business_line" else "c", name)
        for name in target.columns
    ]
    inner = SQL("SELECT {key}, {sums}\n    FROM {source} WHERE {hours}\n    GROUP BY {groups}").format(
        key=names(key),
        sums=commas(SQL("{} AS {}").format(_summed(m), Identifier(m)) for m in target.measures),
        source=Identifier(source),
        hours=_HOURS,
        groups=_positions(len(key)),
    )
    statement = SQL("INSERT INTO {} ({})\nSELECT {}\nFROM (\n    {}\n) c {}").format(
        Identifier(target.table), names(target.columns), commas(selected), inner, dims_join("c")
    )
    return statement + SQL("\nWHERE c.tokens <> 0") if nonzero else statement


def _line_insert(target: Rollup, source: Rollup) -> Composed:
    """The day's rows of `target` from the daily rollup `source`, by business line alone."""
    return SQL("INSERT INTO {} ({})\nSELECT {}, {}\nFROM {} WHERE day = %(start)s GROUP BY {}").format(
        Identifier(target.table),
        names(target.columns),
        names(target.key),
        commas(_summed(m) for m in target.measures),
        Identifier(source.table),
        _positions(len(target.key)),
    )


def _hours_line_insert(target: Rollup, source: str) -> Composed:
    """The hours' rows of `target` from the hourly rollup `source`, by business line."""
    selected = [col("d" if name == "business_line" else "c", name) for name in target.key]
    return SQL(
        "INSERT INTO {} ({})\nSELECT {}, {}\nFROM {} c {}\nWHERE c.hour >= %(start)s AND c.hour < %(end)s\n"
        "GROUP BY {} HAVING sum(c.tokens) <> 0"
    ).format(
        Identifier(target.table),
        names(target.columns),
        commas(selected),
        commas(_summed(m, "c") for m in target.measures),
        Identifier(source),
        dims_join("c"),
        _positions(len(target.key)),
    )


def _positions(count: int) -> Composed:
    return SQL(", ").join(Literal(i) for i in range(1, count + 1))


def _delete_day(target: Rollup) -> Composed:
    return SQL("DELETE FROM {} WHERE day = %(start)s").format(Identifier(target.table))


# A day's rebuild, statement by statement: its marks before the cutoff cleared, its daily rows
# replaced, its hours by business line replaced, its cutoff kept.
REBUILD = tuple(
    text(statement)
    for statement in (
        STALE.clear_day(day="day", before="end"),
        _delete_day(DAILY_CLASS),
        _delete_day(DAILY_COST),
        _day_insert(DAILY_CLASS, HourlyClass._meta.db_table, nonzero=True),
        _day_insert(DAILY_COST, HourlyCost._meta.db_table, nonzero=False),
        _delete_day(DAILY_LINE_CLASS),
        _delete_day(DAILY_LINE_COST),
        _line_insert(DAILY_LINE_CLASS, DAILY_CLASS),
        _line_insert(DAILY_LINE_COST, DAILY_COST),
        SQL("DELETE FROM {} WHERE hour >= %(start)s AND hour < %(day_end)s").format(
            Identifier(HOURLY_LINE_CLASS.table)
        ),
        _hours_line_insert(HOURLY_LINE_CLASS, HourlyClass._meta.db_table),
        SQL(
            "INSERT INTO {} (day, through) VALUES (%(day)s, %(end)s)\n"
            "ON CONFLICT (day) DO UPDATE SET through = excluded.through"
        ).format(table(BuiltDay)),
    )
)
_BUILT_BETWEEN = text(
    SQL(
        "SELECT b.day, b.through FROM {built} b WHERE b.day >= %s AND b.day <= %s "
        "AND NOT EXISTS (SELECT 1 FROM {stale} s WHERE s.day = b.day AND s.hour < b.through)"
    ).format(built=table(BuiltDay), stale=Identifier(STALE.table))
)


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def hour_now() -> datetime:
    return hour_floor(datetime.now(UTC))


@dataclass
class StaleDays(MarkConsumer[date, bool]):
    """The days with a changed hour before `now` (the hour in progress), rebuilt a day per
    transaction under the day's lock; the rebuild clears the day's marks before its cutoff
    (REBUILD's first statement), as it does for a day rebuilt on its own."""

    marks = STALE
    read = Read.BEFORE
    clear = Clear.WORK
    now: datetime = field(default_factory=hour_now)

    def cutoff(self) -> datetime:
        return self.now

    def lock(self, unit: date) -> tuple[int, int]:
        return LOCK_SPACE, (unit - EPOCH).days

    def work(self, unit: date, values: list[date]) -> bool:
        start = midnight(unit)
        with connection.cursor() as cursor:
            for statement in REBUILD:
                cursor.execute(statement, {"day": unit, "start": start, "end": self.end(unit), "day_end": start + DAY})
        return True

    def end(self, day: date) -> datetime:
        """The day's cutoff: its end, or the hour in progress."""
        return min(midnight(day) + DAY, self.now)


def refresh_day(day: date, *, now: datetime | None = None) -> bool:
    """Rebuild one UTC day's daily rows from its hourly rows before the hour in progress (all of
    them for a day that has ended) and clear the marks of those hours. False for a day not begun."""
    stale = StaleDays(now=now or hour_now())
    if stale.end(day) <= midnight(day):
        return False
    return stale.unit_run(day)


def stale_days(*, now: datetime | None = None) -> list[date]:
    """Days with a changed hour that has ended: what the refresh job rebuilds."""
    return StaleDays(now=now or hour_now()).marked()


def refresh_stale(*, seconds: float | None = None) -> list[date]:
    """Rebuild every day with a changed hour that has ended, oldest first (or until `seconds` have
    passed); returns those done. The day in progress is rebuilt once an hour as its hours end."""
    done = StaleDays().run(seconds=seconds).units
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
        cursor.execute(_BUILT_BETWEEN, [first, last])
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
