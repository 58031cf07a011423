"""The run of a consumer of change marks: one loop for every stage that rebuilds what changed
upstream (docs/architecture.md, "Change detection").

A consumer subclasses `MarkConsumer`: it names its `Marks`, how it reads them (`read`) and clears
them (`clear`), the unit of work of a mark (`unit`: its hour, its day, its month), and the `work`
that rebuilds a unit; where it has them, the advisory lock of a unit (`lock`), the values it does
beside its marks (`extra`: pricing's pool hours not allocated yet, the ledger's recent and open
months), the units it clears without work (`dropped`: days whose records retention emptied) and
what it loads once before the first unit (`begin`: a price book, a rule set). An instance is one
run, its fields the run's inputs (the hour it runs at); `run()` then:

1. reads the marks to do (all of them, those up to the latest id, or those before `cutoff()`)
   and adds the `extra` values;
2. groups them by unit, oldest first, at most `limit` units;
3. clears the marks of the `dropped` units by value, and `begin`s when a unit is left;
4. runs each unit in its own transaction (unless `atomic` is off): its lock first, then its marks
   taken (`Clear.TAKE`), then `work(unit, values)`, then its marks cleared (`Clear.VALUES`);
   before each unit, it stops once `seconds` have passed;
5. with `Clear.THROUGH`, once every unit is done, clears the marks up to the latest id it read:
   a mark written meanwhile stays for the next run, as it does under every other `clear`.

It returns a `MarkRun`: each unit done with what its work returned, the units dropped, the marks
read, and whether the time budget stopped it."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

from django.db import connection, transaction

from apps.common.composed import text
from apps.common.db import xact_lock
from apps.common.rollup import Marks

U = TypeVar("U")  # a unit of work: an hour, a day, a month
R = TypeVar("R")  # what the work of a unit returns

clock = time.monotonic  # the time budget's clock


class Read(Enum):
    ALL = "all"  # every mark
    LATEST = "latest"  # the marks up to the latest id (Marks.latest), read first
    BEFORE = "before"  # the marks before the consumer's cutoff()


class Clear(Enum):
    THROUGH = "through"  # by id, up to the latest read, once every unit is done
    TAKE = "take"  # in the unit's transaction, before its work: its span's marks, handed to the work
    VALUES = "values"  # in the unit's transaction, after its work: the values read of the unit (no `day` column)
    WORK = "work"  # by the work itself (a unit's rebuild that also runs on its own clears its marks)


@dataclass
class MarkRun(Generic[U, R]):
    """What a consumer's run did."""

    done: list[tuple[U, R]] = field(default_factory=list)  # the units worked, in order, with their results
    dropped: list[U] = field(default_factory=list)  # units whose marks were cleared without work
    marks: int = 0  # the distinct marks read
    stopped: bool = False  # the time budget ran out before every unit was done

    @property
    def units(self) -> list[U]:
        return [unit for unit, _ in self.done]

    @property
    def results(self) -> list[R]:
        return [result for _, result in self.done]


class MarkConsumer(Generic[U, R]):
    """A stage that rebuilds the units of work its change marks name; see the module docstring.
    Subclasses set `marks` (and `read`, `clear`, `atomic` where they differ) and define `work`."""

    marks: ClassVar[Marks]
    read: ClassVar[Read] = Read.ALL
    clear: ClassVar[Clear] = Clear.VALUES
    atomic: ClassVar[bool] = True  # each unit in its own transaction (off: the work keeps its own)

    def unit(self, mark: Any) -> U:
        """The unit of work of a mark's (or an extra) value: by default the value itself."""
        return mark  # type: ignore[no-any-return]

    def span(self, unit: U) -> tuple[Any, Any]:
        """[first, end) of the mark values of `unit`: what `Clear.TAKE` takes."""
        raise NotImplementedError(f"{type(self).__name__} takes its marks: it needs span()")

    def cutoff(self) -> Any:
        """With `Read.BEFORE`: the marks before this are read."""
        raise NotImplementedError(f"{type(self).__name__} reads the marks before a cutoff: it needs cutoff()")

    def lock(self, unit: U) -> tuple[int, int] | None:
        """The advisory lock (namespace, key) held exclusively by a unit's transaction, first."""
        return None

    def extra(self, marks: list[Any]) -> Iterable[Any]:
        """Values to do beside the marks read (`marks`), grouped by `unit` like them, never cleared."""
        return ()

    def dropped(self, units: list[U]) -> Collection[U]:
        """Of the units to do, those whose marks are cleared without work."""
        return ()

    def begin(self, units: list[U]) -> None:
        """Before the first unit (only when there is one): load what every unit needs."""

    def work(self, unit: U, values: list[Any]) -> R:
        """Rebuild `unit`; `values` are its marks (those taken, with `Clear.TAKE`) and extra
        values, sorted."""
        raise NotImplementedError

    def run(self, *, limit: int | None = None, seconds: float | None = None) -> MarkRun[U, R]:
        """Do the marked units, oldest first: at most `limit` of them, and none begun once
        `seconds` have passed."""
        started = clock()
        latest, marks = self._marks_read()
        grouped: dict[U, set[Any]] = defaultdict(set)
        extra: dict[U, set[Any]] = defaultdict(set)
        for mark in marks:
            grouped[self.unit(mark)].add(mark)
        for value in self.extra(marks):
            extra[self.unit(value)].add(value)
        units = sorted(grouped.keys() | extra.keys())[:limit]  # type: ignore[type-var]
        run: MarkRun[U, R] = MarkRun(marks=len(marks))
        dropped = set(self.dropped(units))
        if dropped:
            run.dropped = [u for u in units if u in dropped]
            self._values_clear(sorted(v for u in run.dropped for v in grouped[u]))
            units = [u for u in units if u not in dropped]
        if units:
            self.begin(units)
        for unit in units:
            if seconds is not None and clock() - started > seconds:
                run.stopped = True
                break
            run.done.append((unit, self.unit_run(unit, grouped[unit], extra[unit])))
        if self.clear is Clear.THROUGH and latest is not None and not run.stopped:
            with connection.cursor() as cursor:
                cursor.execute(text(self.marks.clear_through()), [latest])
        return run

    def unit_run(self, unit: U, marks: Iterable[Any] = (), extra: Iterable[Any] = ()) -> R:
        """One unit: in its transaction, its lock, its marks taken, its work, its marks cleared."""
        if not self.atomic:
            return self._unit_work(unit, set(marks), set(extra))
        with transaction.atomic():
            return self._unit_work(unit, set(marks), set(extra))

    def _unit_work(self, unit: U, marks: set[Any], extra: set[Any]) -> R:
        lock = self.lock(unit)
        with connection.cursor() as cursor:
            if lock is not None:
                xact_lock(cursor, *lock)
            if self.clear is Clear.TAKE:
                cursor.execute(text(self.marks.take()), list(self.span(unit)))
                marks = {value for (value,) in cursor.fetchall()}
        result = self.work(unit, sorted(marks | extra))
        if self.clear is Clear.VALUES and marks:
            self._values_clear(sorted(marks))
        return result

    def marked(self) -> list[Any]:
        """The distinct marks a run would read now, oldest first."""
        return self._marks_read()[1]

    def _marks_read(self) -> tuple[Any, list[Any]]:
        """The latest id (with `Read.LATEST`) and the distinct marks to do, oldest first."""
        with connection.cursor() as cursor:
            if self.read is Read.LATEST:
                cursor.execute(text(self.marks.latest()))
                (latest,) = cursor.fetchone()
                cursor.execute(text(self.marks.marked(through=True)), [latest])
                return latest, [value for (value,) in cursor.fetchall()]
            if self.read is Read.BEFORE:
                cursor.execute(text(self.marks.marked(before=True)), [self.cutoff()])
            else:
                cursor.execute(text(self.marks.marked()))
            return None, [value for (value,) in cursor.fetchall()]

    def _values_clear(self, values: list[Any]) -> None:
        if self.marks.day is not None:  # its marks are read as days, its clear() takes instants
            raise ValueError(f"{self.marks.table} is read by day: it cannot be cleared by the values read")
        with connection.cursor() as cursor:
            cursor.execute(text(self.marks.clear()), [values])
