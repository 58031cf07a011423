"""Resumable runs of a job over a range of days: reclassify, reprice and accrual use this one.

`jobrun_run(kind=..., start=..., end=..., work=...)` calls `work(day)` for each step of
[start, end) (a day; `step=` gives another size, e.g. a month), each in its own transaction
that also records the progress in a `JobRun` row. The run is found by (kind, key, start, end)
among the runs not done, or made: after a crash or an error (the row says FAILED, with the
error) the same call resumes at the first step not done; once a run is done, the same call
starts a new one. An advisory lock on the run refuses (`RunBusy`) a second process
while the first runs.

With `workers` > 1, that many steps run at once, each in its own transaction on its own
connection, and they commit in step order: the progress means what it means when they run
one by one, and a crash or an error leaves the steps before the first unfinished one
committed, none after.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.common.db import xact_lock, xact_lock_try
from apps.common.models import JobRun

DAY = timedelta(days=1)
# (namespace, run id): the session lock of the process running a run.
_RUN_LOCK = 0x4A4F4252
ERROR_CHARS = 2000

Progress = Callable[[date, int, int], None]  # (the step just done, steps done, steps in all)
Work = Callable[[date], object]
Step = Callable[[date], date]  # a step's first day -> the next step's


class RunBusy(RuntimeError):
    """Another process holds the run's lock: it is running it now."""


def day_after(day: date) -> date:
    return day + DAY


def jobrun_run(
    *,
    kind: str,
    start: date,
    end: date,
    work: Work,
    key: str = "",
    progress: Progress | None = None,
    workers: int = 1,
    step: Step = day_after,
) -> JobRun:
    """Run `work` over the steps of [start, end) as the module docstring says; returns the run."""
    if end <= start:
        raise ValueError("end must be after start")
    run = jobrun_open(kind=kind, key=key, start=start, end=end)
    with _run_locked(run):
        try:
            _steps_run(run, work, progress, workers, step)
        except BaseException as exc:
            JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.FAILED, error=repr(exc)[:ERROR_CHARS])
            raise
    run.refresh_from_db()
    return run


def jobrun_open(*, kind: str, key: str = "", start: date, end: date) -> JobRun:
    """The run of this job not done yet (running or failed), or a new one from `start`."""
    runs = JobRun.objects.filter(kind=kind, key=key, start=start, end=end).exclude(status=JobRun.Status.DONE)
    return runs.first() or JobRun.objects.create(kind=kind, key=key, start=start, end=end, next_day=start)


@contextmanager
def _run_locked(run: JobRun) -> Iterator[None]:
    """The run's lock, for as long as it runs: a transaction-level advisory lock, in a transaction
    left open on a connection of its own. A session lock would be lost behind a pooler in
    transaction mode (PgBouncer): the next transaction may get another server connection, and the
    unlock would miss (docs/scaling.md). The open transaction holds no snapshot between statements
    (read committed), so it holds back no vacuum; when the process dies, its connection ends and
    the lock with it."""
    holder = connection.get_new_connection(connection.get_connection_params())
    try:
        if not xact_lock_try(holder.cursor(), _RUN_LOCK, run.pk):
            raise RunBusy(f"{run} is being run by another process")
        yield
    finally:
        holder.close()  # the transaction ends with it, and the lock


def steps_of(*, start: date, end: date, step: Step = day_after) -> list[date]:
    """The first day of each step of [start, end)."""
    days, day = [], start
    while day < end:
        days.append(day)
        day = step(day)
    return days


class _Plan:
    """The steps of a run: all of them (for the progress count) and those still to do."""

    def __init__(self, run: JobRun, step: Step) -> None:
        self.run, self.step = run, step
        self.all = steps_of(start=run.start, end=run.end, step=step)
        self.todo = [d for d in self.all if d >= run.next_day]
        self.done_before = len(self.all) - len(self.todo)

    def following(self, day: date) -> date:
        return min(self.step(day), self.run.end)

    def saved(self, day: date) -> None:
        """Record `day` done (in the step's transaction)."""
        JobRun.objects.filter(pk=self.run.pk).update(
            next_day=self.following(day), status=JobRun.Status.RUNNING, error="", updated_at=timezone.now()
        )

    def report(self, progress: Progress | None, index: int) -> None:
        if progress is not None:
            progress(self.todo[index], self.done_before + index + 1, len(self.all))


def _steps_run(run: JobRun, work: Work, progress: Progress | None, workers: int, step: Step) -> None:
    plan = _Plan(run, step)
    # Inside a caller's transaction (tests), other connections would not see its rows.
    if workers > 1 and len(plan.todo) > 1 and not connection.in_atomic_block:
        _steps_together(plan, work, progress, workers)
    else:
        for index, day in enumerate(plan.todo):
            with transaction.atomic():
                work(day)
                plan.saved(day)
            plan.report(progress, index)
    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.DONE, finished_at=timezone.now())


# --- steps at the same time ---------------------------------------------------------------------


def _order_namespace(kind: str) -> int:
    """The advisory lock namespace (a signed int4) of a kind's step-order locks."""
    value = zlib.crc32(f"dayrun:{kind}".encode())
    return value - (1 << 32) if value >= 1 << 31 else value


class _StepOrder:
    """The commit order of steps run at the same time (by index in the plan's `todo`): a step
    commits only after the one before it has; once a step fails (or the run is stopped), no
    later step commits."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.next = 0  # the step whose turn it is to commit
        self.stop_at: int | None = None  # no step from this one on commits
        self.locked: set[int] = set()  # steps whose transaction holds the step's order lock

    def stopped(self, index: int) -> bool:
        return self.stop_at is not None and index >= self.stop_at

    def lock_taken(self, index: int) -> None:
        with self.cond:
            self.locked.add(index)
            self.cond.notify_all()

    def wait_lock_taken(self, index: int, *, waiting: int) -> bool:
        """Wait until step `index`'s transaction holds its lock; False when `waiting` must not commit."""
        with self.cond:
            self.cond.wait_for(lambda: index in self.locked or self.stopped(waiting))
            return not self.stopped(waiting)

    def wait_turn(self, index: int) -> bool:
        """Wait until the steps before `index` have committed; False when it must not commit."""
        with self.cond:
            self.cond.wait_for(lambda: self.next == index or self.stopped(index))
            return not self.stopped(index)

    def committed(self, index: int) -> None:
        with self.cond:
            self.next = index + 1
            self.cond.notify_all()

    def stop(self, index: int) -> None:
        with self.cond:
            self.stop_at = index if self.stop_at is None else min(self.stop_at, index)
            self.cond.notify_all()


class _NotCommitted(Exception):
    """A step run after a step that failed: rolled back, as it would not have run."""


# A day's place in a run's commit order, held to the end of the transaction (shared: by a reader).
def _order_lock(cursor: Any, namespace: int, day: date, *, shared: bool = False) -> None:
    xact_lock(cursor, namespace, day.toordinal(), shared=shared)


def _step_commit(plan: _Plan, work: Work, order: _StepOrder, namespace: int, index: int) -> None:
    """One step's transaction: its order lock first (for the next step to wait on), the work,
    then a wait for the step before it to commit, and the progress."""
    day = plan.todo[index]
    with transaction.atomic():
        with connection.cursor() as cursor:
            _order_lock(cursor, namespace, day)
        order.lock_taken(index)
        work(day)
        with connection.cursor() as cursor:
            # The deferred foreign-key checks now, not while the next step waits.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            # Wait for the step before to end in PostgreSQL (its lock), where a lock cycle
            # between the two steps is a deadlock error, not a hang.
            if index > 0 and order.wait_lock_taken(index - 1, waiting=index):
                _order_lock(cursor, namespace, plan.todo[index - 1], shared=True)
        if not order.wait_turn(index):
            raise _NotCommitted
        plan.saved(day)


def _steps_together(plan: _Plan, work: Work, progress: Progress | None, workers: int) -> None:
    order, namespace = _StepOrder(), _order_namespace(plan.run.kind)
    todo, lock = deque(range(len(plan.todo))), threading.Lock()
    done: queue.Queue[int | None] = queue.Queue()
    errors: dict[int, BaseException] = {}

    def work_steps() -> None:
        try:
            while True:
                with lock:
                    if not todo or order.stopped(todo[0]):
                        return
                    index = todo.popleft()
                try:
                    _step_commit(plan, work, order, namespace, index)
                except _NotCommitted:
                    return
                except BaseException as exc:
                    errors[index] = exc
                    order.stop(index)
                    return
                order.committed(index)
                done.put(index)
        finally:
            connection.close()
            done.put(None)

    count = min(workers, len(plan.todo))
    threads = [threading.Thread(target=work_steps, name=f"{plan.run.kind}-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        running = len(threads)
        while running:
            index = done.get()
            if index is None:
                running -= 1
            else:
                plan.report(progress, index)
    finally:
        order.stop(0)  # after an error here (Ctrl-C, progress): steps not committed yet roll back
        for thread in threads:
            thread.join()
    if errors:
        raise errors[min(errors)]
