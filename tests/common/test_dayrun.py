"""The resumable day-run: a step per transaction with its progress, resumed after a failure,
refused while another process holds the run, started anew once done; steps run at the same
time commit in step order. The work writes ledger DirtyDay rows: a real table to see which
steps committed."""

from __future__ import annotations

import threading
from datetime import date, timedelta

import psycopg
import pytest
from django.db import connection

from apps.common import dayrun
from apps.common.buckets import next_month
from apps.common.dayrun import RunBusy, jobrun_open, jobrun_run
from apps.common.models import JobRun
from apps.ledger.models import DirtyDay

pytestmark = pytest.mark.django_db
START = date(2026, 3, 10)
DAYS = [START + timedelta(days=i) for i in range(3)]
END = DAYS[-1] + timedelta(days=1)


def committed() -> list[date]:
    return sorted(DirtyDay.objects.values_list("day", flat=True))


class Work:
    """Writes a row of the day, then fails on the days in `fail` (once each)."""

    def __init__(self, fail: tuple[date, ...] = ()) -> None:
        self.fail = set(fail)
        self.calls: list[date] = []

    def __call__(self, day: date) -> None:
        self.calls.append(day)
        DirtyDay.objects.create(day=day)
        if day in self.fail:
            self.fail.discard(day)
            raise RuntimeError(f"worker killed on {day}")


def test_it_resumes_after_a_failure_at_the_first_step_not_done() -> None:
    work, seen = Work(fail=(DAYS[1],)), []
    with pytest.raises(RuntimeError, match="worker killed"):
        jobrun_run(kind="test", key="k", start=START, end=END, work=work)
    failed = JobRun.objects.get()
    assert (failed.status, failed.next_day) == (JobRun.Status.FAILED, DAYS[1])
    assert "worker killed" in failed.error
    assert committed() == [DAYS[0]]  # the failing day's row rolled back with it

    resumed = jobrun_run(kind="test", key="k", start=START, end=END, work=work, progress=lambda *a: seen.append(a))

    assert resumed.pk == failed.pk and resumed.status == JobRun.Status.DONE and resumed.error == ""
    assert resumed.next_day == END and resumed.finished_at is not None
    assert work.calls == [DAYS[0], DAYS[1], DAYS[1], DAYS[2]]
    assert seen == [(DAYS[1], 2, 3), (DAYS[2], 3, 3)]  # counted from the run's start
    assert committed() == DAYS


def test_another_key_or_range_is_another_run() -> None:
    with pytest.raises(RuntimeError):
        jobrun_run(kind="test", key="a", start=START, end=END, work=Work(fail=(DAYS[0],)))
    other = Work()
    run = jobrun_run(kind="test", key="b", start=START, end=END, work=other)
    assert run.status == JobRun.Status.DONE and other.calls == DAYS
    assert JobRun.objects.filter(key="a", status=JobRun.Status.FAILED).count() == 1


def test_it_refuses_a_run_another_process_holds() -> None:
    run = jobrun_open(kind="test", start=START, end=END)
    db = connection.settings_dict
    work = Work()
    with psycopg.connect(dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or 5432) as other:
        other.execute("SELECT pg_advisory_lock(%s::int, %s::int)", [dayrun._RUN_LOCK, run.pk])
        with pytest.raises(RunBusy, match="being run by another process"):
            jobrun_run(kind="test", start=START, end=END, work=work)
        assert work.calls == [] and JobRun.objects.get().status == JobRun.Status.RUNNING
        # Once the other process lets go, the same call runs it.
        other.execute("SELECT pg_advisory_unlock(%s::int, %s::int)", [dayrun._RUN_LOCK, run.pk])
    assert jobrun_run(kind="test", start=START, end=END, work=work).pk == run.pk
    assert work.calls == DAYS


def test_a_done_run_is_started_anew() -> None:
    first = jobrun_run(kind="test", start=START, end=END, work=Work())
    work = Work()

    second = jobrun_run(kind="test", start=START, end=END, work=work)

    assert second.pk != first.pk and second.status == JobRun.Status.DONE
    assert work.calls == DAYS
    assert JobRun.objects.filter(status=JobRun.Status.DONE).count() == 2


def test_it_runs_months_as_steps() -> None:
    work, seen = Work(fail=(date(2026, 2, 1),)), []
    with pytest.raises(RuntimeError):
        jobrun_run(kind="test", start=date(2026, 1, 1), end=date(2026, 4, 1), work=work, step=next_month)
    assert JobRun.objects.get().next_day == date(2026, 2, 1)

    def progress(*report: object) -> None:
        seen.append(report)

    run = jobrun_run(
        kind="test", start=date(2026, 1, 1), end=date(2026, 4, 1), work=work, step=next_month, progress=progress
    )

    assert run.next_day == date(2026, 4, 1)
    assert seen == [(date(2026, 2, 1), 2, 3), (date(2026, 3, 1), 3, 3)]


def test_it_refuses_an_empty_range() -> None:
    with pytest.raises(ValueError, match="end must be after start"):
        jobrun_run(kind="test", start=START, end=START, work=Work())
    assert not JobRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_steps_run_at_the_same_time_commit_in_order_and_none_after_a_failure() -> None:
    """Two workers: day 3 is worked on while day 2 is still open; day 2 fails, so day 3 (done,
    waiting for its turn) rolls back: the run stops where a one-by-one run would have."""
    later_done = threading.Event()
    threads: set[str] = set()

    def work(day: date) -> None:
        threads.add(threading.current_thread().name)
        DirtyDay.objects.create(day=day)
        if day == DAYS[2]:
            later_done.set()
        if day == DAYS[1]:
            assert later_done.wait(20), "day 3 did not run beside day 2"
            raise RuntimeError("day 2 failed")

    days = [*DAYS, DAYS[2] + timedelta(days=1)]
    with pytest.raises(RuntimeError, match="day 2 failed"):
        jobrun_run(kind="test", start=START, end=days[-1] + timedelta(days=1), work=work, workers=2)

    run = JobRun.objects.get()
    assert (run.status, run.next_day) == (JobRun.Status.FAILED, DAYS[1])
    assert committed() == [DAYS[0]]
    assert len(threads) == 2

    seen: list[tuple[date, int, int]] = []
    resumed = jobrun_run(
        kind="test",
        start=START,
        end=days[-1] + timedelta(days=1),
        work=lambda day: DirtyDay.objects.create(day=day),
        workers=2,
        progress=lambda *a: seen.append(a),
    )
    assert resumed.pk == run.pk and resumed.status == JobRun.Status.DONE
    assert committed() == days
    assert seen == [(d, i + 1, 4) for i, d in enumerate(days)][1:]  # reported in day order
