"""The run of a consumer of change marks, on mark tables of its own (temporary): the units of the
marks worked in order, each in its own transaction under its lock, the marks cleared as the
consumer says, a mark written during the run kept for the next one, the time budget stopping it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from apps.common import markrun
from apps.common.buckets import month_of
from apps.common.composed import SQL, Identifier, text
from apps.common.markrun import Clear, MarkConsumer, Read
from apps.common.rollup import Marks

pytestmark = pytest.mark.django_db
DAYS = [date(2026, 3, 30) + timedelta(days=i) for i in range(6)]  # 30 March .. 4 April
MARKS = Marks("markrun_day", "day", type="date")
HOURS = Marks("markrun_hour", "hour")
LOCK = (0x4D41524B, 7)


@pytest.fixture(autouse=True)
def mark_tables() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE markrun_day (id bigserial PRIMARY KEY, day date NOT NULL)")
        cursor.execute("CREATE TEMPORARY TABLE markrun_hour (id bigserial PRIMARY KEY, hour timestamptz NOT NULL)")
        cursor.execute("CREATE TEMPORARY TABLE markrun_done (unit text NOT NULL)")


def mark(marks: Marks, *values: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(text(marks.mark()), [list(values)])


def marked(marks: Marks) -> list[Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            text(SQL("SELECT {} FROM {} ORDER BY id").format(Identifier(marks.column), Identifier(marks.table)))
        )
        return [value for (value,) in cursor.fetchall()]


def written() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT unit FROM markrun_done")
        return sorted(unit for (unit,) in cursor.fetchall())


class Days(MarkConsumer[date, int]):
    """A day per unit; marks `during[day]` while it works `day`, and fails on `fail`."""

    marks = MARKS

    def __init__(self, *, during: dict[date, list[date]] | None = None, fail: date | None = None) -> None:
        self.during, self.fail = during or {}, fail
        self.calls: list[tuple[date, list[Any]]] = []
        self.begun: list[list[date]] = []

    def begin(self, units: list[date]) -> None:
        self.begun.append(units)

    def work(self, unit: date, values: list[Any]) -> int:
        self.calls.append((unit, values))
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO markrun_done VALUES (%s)", [str(unit)])
        mark(MARKS, *self.during.get(unit, []))
        if unit == self.fail:
            raise RuntimeError(f"failed on {unit}")
        return unit.day


class LatestDays(Days):
    read = Read.LATEST
    clear = Clear.THROUGH


def test_it_works_each_marked_unit_once_in_order_and_clears_by_value() -> None:
    mark(MARKS, DAYS[2], DAYS[0])
    mark(MARKS, DAYS[2], DAYS[1])
    consumer = Days()

    run = consumer.run()

    assert consumer.calls == [(DAYS[0], [DAYS[0]]), (DAYS[1], [DAYS[1]]), (DAYS[2], [DAYS[2]])]
    assert consumer.begun == [DAYS[:3]]
    assert run.done == [(DAYS[0], 30), (DAYS[1], 31), (DAYS[2], 1)] and run.marks == 3 and not run.stopped
    assert marked(MARKS) == []
    assert Days().run().done == [] and Days().begun == []  # nothing left: no work, nothing begun


def test_it_keeps_a_mark_written_during_the_run_for_the_next_run_when_it_clears_through_the_latest() -> None:
    mark(MARKS, DAYS[1], DAYS[0])
    first = LatestDays(during={DAYS[0]: [DAYS[3]]})

    assert first.run().units == [DAYS[0], DAYS[1]]
    assert marked(MARKS) == [DAYS[3]]  # written after the latest mark it read
    assert LatestDays().run().units == [DAYS[3]]
    assert marked(MARKS) == []


def test_it_clears_the_marks_of_the_units_done_before_one_that_failed_and_rolls_that_one_back() -> None:
    mark(MARKS, *DAYS[:3])

    with pytest.raises(RuntimeError, match="failed on"):
        Days(fail=DAYS[1]).run()

    assert written() == [str(DAYS[0])]  # the failed unit's writes went with its transaction
    assert marked(MARKS) == DAYS[1:3]


def test_it_stops_at_the_time_budget_and_leaves_the_rest_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 100, 10))  # ten seconds pass between readings
    monkeypatch.setattr(markrun, "clock", lambda: next(clock))
    mark(MARKS, *DAYS[:4])

    run = Days().run(seconds=15)  # started at 0; units begun at 10, then 20 is past the budget

    assert run.units == [DAYS[0]] and run.stopped
    assert marked(MARKS) == DAYS[1:4]


def test_it_clears_nothing_through_the_latest_when_the_budget_stopped_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 100, 10))
    monkeypatch.setattr(markrun, "clock", lambda: next(clock))
    mark(MARKS, *DAYS[:3])

    assert LatestDays().run(seconds=15).units == [DAYS[0]]
    assert marked(MARKS) == DAYS[:3]  # by id it clears all it read or nothing


class Months(MarkConsumer[date, list[Any]]):
    """A month per unit, with the first of next month done beside every mark; drops March."""

    marks = MARKS

    def unit(self, mark: Any) -> date:
        return month_of(mark)

    def extra(self, marks: list[Any]) -> list[date]:
        return [month_of(m + timedelta(days=40)) for m in marks]

    def dropped(self, units: list[date]) -> list[date]:
        return [u for u in units if u.month == 3]

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    def work(self, unit: date, values: list[Any]) -> list[Any]:
        self.seen.append(marked(MARKS))
        return values


def test_it_groups_the_marks_by_unit_with_the_extra_values_and_clears_the_dropped_units_without_work() -> None:
    mark(MARKS, DAYS[5], DAYS[0], DAYS[4], DAYS[1])

    consumer = Months()
    run = consumer.run()

    may = date(2026, 5, 1)
    assert consumer.seen[0] == [DAYS[5], DAYS[4]]  # March's cleared first; April's after its work
    assert run.dropped == [date(2026, 3, 1)]
    assert run.done == [(date(2026, 4, 1), [DAYS[4], DAYS[5]]), (may, [may])]
    assert marked(MARKS) == []
    mark(MARKS, DAYS[4], DAYS[0])
    assert Months().run(limit=2).units == [date(2026, 4, 1)]  # the first two units: March (dropped) and April


class Hours(MarkConsumer[date, list[Any]]):
    """The hours marked, a UTC day per unit, taken under the day's lock; marks `during` while
    it works its first day."""

    marks = HOURS
    clear = Clear.TAKE

    def __init__(self, during: list[datetime]) -> None:
        self.during = during
        self.locks: list[bool] = []

    def unit(self, mark: Any) -> date:
        return mark.astimezone(UTC).date()

    def span(self, unit: date) -> tuple[datetime, datetime]:
        start = datetime(unit.year, unit.month, unit.day, tzinfo=UTC)
        return start, start + timedelta(days=1)

    def lock(self, unit: date) -> tuple[int, int]:
        return LOCK

    def work(self, unit: date, values: list[Any]) -> list[Any]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s "
                "AND mode = 'ExclusiveLock' AND granted AND pid = pg_backend_pid()",
                list(LOCK),
            )
            self.locks.append(cursor.fetchone()[0] == 1)
        mark(HOURS, *self.during)
        self.during = []
        return values


def test_it_takes_a_units_marks_under_its_lock_with_those_written_since_they_were_read() -> None:
    at = [datetime(2026, 4, 1, h, tzinfo=UTC) for h in (3, 1)] + [datetime(2026, 4, 2, 5, tzinfo=UTC)]
    mark(HOURS, *at)
    later = [datetime(2026, 4, 2, 7, tzinfo=UTC), datetime(2026, 4, 1, 9, tzinfo=UTC), datetime(2026, 4, 3, tzinfo=UTC)]
    consumer = Hours(during=later)

    run = consumer.run()

    assert consumer.locks == [True, True]
    assert run.done == [(date(2026, 4, 1), [at[1], at[0]]), (date(2026, 4, 2), [at[2], later[0]])]
    # the 1 April mark written after its day was taken, and a day not read, stay for the next run
    assert marked(HOURS) == [later[1], later[2]]
