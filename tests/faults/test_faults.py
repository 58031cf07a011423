"""Faults while the platform works: PostgreSQL restarted and crashed and the web server killed
while the shipper streams records in; the Celery worker killed in the middle of a month close
and of a reclassify run; webhook receivers answering 500; the shipper's spool at its quota.
After each: every record stored exactly once (ids, token sums, hourly rollups), every journal
entry and trial balance balanced, the interrupted job finished with the same result as a run
nothing interrupted, every alert delivered once or marked failed."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client import CollectorRegistry

from apps.classification.services import _DAY_LOCK as CLASSIFY_DAY_LOCK
from apps.classification.services import RUN_KIND as RECLASSIFY_KIND
from apps.common.models import JobRun
from apps.ledger.services.accrual import _MONTH_LOCK
from tests.faults.harness import (
    ALERTS,
    CLASSES,
    JOURNAL,
    RATE,
    RECORDS,
    REPEATS,
    RETRY_DELAYS,
    Gate,
    Hook,
    Outcome,
    Row,
    Stream,
    Worker,
    assert_ledger_balances,
    assert_stored_once,
    enqueue,
    lock_waiters,
    ops,
    ops_start,
    ops_wait,
    outcome_table,
    record_counts,
    records_measure,
    rows,
    scalar,
    stored,
    wait_until,
)
from tests.faults.stream import Sent, records
from wire.shipper import Pipeline

pytestmark = pytest.mark.slow


def month_start(months_ago: int) -> date:
    today = datetime.now(UTC).date().replace(day=1)
    index = today.year * 12 + today.month - 1 - months_ago
    return date(index // 12, index % 12 + 1, 1)


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def settle(suite: Any, first: date, days: int = 1) -> dict[str, Any]:
    """Price the dirty hours and accrue the days, as beat would; the ledger's state."""
    return ops(suite.env, "settle", "--from", first.isoformat(), "--to", (first + timedelta(days=days)).isoformat())


# --- (a) and (b): the database and the web server go away while records stream in --------


def streamed_through(suite: Any, fault_row: Row, fault: str, prefix: str, day: date, inject: Any) -> None:
    key = suite.key()
    stream = Stream(suite.platform.url, key.secret, prefix, RECORDS, midnight(day), 24, suite.workdir, RATE)
    sent = stream.sent()
    row = fault_row(fault, records_measure(suite.url, key.id, sent.ids))
    stream.run().wait_submitted(0.3)
    at_fault = stream.progress()["submitted"]
    stored_before = len(stored(suite.url, key.id).ids)
    inject()
    status = stream.finish()
    failed = stream.progress().get("failed_requests", 0)
    row.note = f"fault at {at_fault} submitted, {stored_before} stored; {failed:.0f} failed requests"
    row.measure()
    assert status == 0, f"the shipper did not ship everything: {stream.progress()}\n{stream.tail()}"
    assert at_fault < RECORDS, "the fault came after the stream ended"
    assert_stored_once(stored(suite.url, key.id), sent)
    assert_ledger_balances(suite.url, settle(suite, day))


# The short form (one repetition) crashes PostgreSQL: `immediate` stops it without a checkpoint,
# so it comes back by replaying the WAL; the full form alternates with a clean `fast` stop.
PG_STOPS = ("immediate", "fast")


@pytest.mark.parametrize("rep", range(REPEATS))
def test_records_survive_postgresql_restarts_mid_stream(rep, suite, fault_row):
    mode = PG_STOPS[rep % 2]
    streamed_through(
        suite,
        fault_row,
        f"(a) PostgreSQL restart -m {mode} mid-stream",
        f"pg{rep}",
        month_start(2) + timedelta(days=rep),
        lambda mode=mode: suite.pg.restart(mode, down_for=0.5),
    )


@pytest.mark.parametrize("rep", range(REPEATS))
def test_records_survive_kill_9_of_the_web_server_mid_stream(rep, suite, fault_row):
    def crash() -> None:
        suite.platform.kill()  # master and workers, SIGKILL
        time.sleep(0.5)
        suite.platform.start()

    streamed_through(
        suite,
        fault_row,
        "(b) kill -9 gunicorn master+workers mid-stream",
        f"web{rep}",
        month_start(2) + timedelta(days=10 + rep),
        crash,
    )


# --- (c): the worker killed in the middle of a month close and of a reclassify run -------

RECLASSIFY_DAYS = 4
# A column of the reclassify run (the only job run these databases hold).
RECLASSIFY_RUN = f"SELECT {{}} FROM {JobRun._meta.db_table} WHERE kind = '{RECLASSIFY_KIND}'"


@pytest.fixture(scope="module")
def jobs_data(suite: Any) -> dict[str, Any]:
    """A month to close and days to reclassify, shipped in without faults; a new rule set and the
    hours priced (not accrued: the close books the month itself)."""
    month, first = month_start(1), month_start(3)
    days = (month_start(0) - month).days
    url, workdir = suite.platform.url, suite.workdir
    close_key, recl_key = suite.key(), suite.key()
    streams = [
        Stream(url, close_key.secret, "close", RECORDS, midnight(month), days * 24, workdir, 4 * RATE, close_key.id),
        Stream(
            url, recl_key.secret, "recl", RECORDS, midnight(first), RECLASSIFY_DAYS * 24, workdir, 4 * RATE, recl_key.id
        ),
    ]
    for stream in streams:
        stream.run()
    for stream in streams:
        stream.wait()
        assert_stored_once(stored(suite.url, stream.key_id), stream.sent())
    version = ops(suite.env, "jobs")["version"]
    sent = {stream.key_id: stream.sent().ids for stream in streams}
    return {
        "month": month, "first": first, "end": first + timedelta(days=RECLASSIFY_DAYS), "version": version,
        "sent": sent,
    }  # fmt: skip


# Where the close is held when its worker is killed: the table lock the test holds (or the
# month's advisory lock, which the close takes first).
CLOSE_POINTS = [
    ("before its commit", "ledger_periodevent"),  # journal, findings and status written
    ("booking the journal", "ledger_journalentry"),
    ("at the month lock", "advisory"),
]


class Holder:
    """A session of the test's own that holds locks the jobs will need."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)

    def hold_table(self, table: str) -> None:
        self.conn.execute("BEGIN")
        self.conn.execute(f"LOCK TABLE {table} IN SHARE MODE".encode())

    def hold_advisory(self, key: tuple[int, int]) -> None:
        self.conn.execute("SELECT pg_advisory_lock(%s::int, %s::int)", list(key))

    def release(self) -> None:
        self.conn.execute("ROLLBACK")  # only a warning when no transaction is open
        self.conn.execute("SELECT pg_advisory_unlock_all()")

    def close(self) -> None:
        self.conn.close()


def no_orphans(url: str) -> bool:
    """The killed worker's server sessions have ended (their transactions rolled back)."""
    return not scalar(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend' AND (state <> 'idle' OR wait_event_type = 'Lock')",
    )


@pytest.fixture
def workers(suite: Any) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.kill()  # the test has seen every job through; nothing is left half-done


def kill_both_mid_job(url: str, env: dict[str, str], broker: str, data: dict[str, Any], rep: int, log: Path) -> None:
    """Two workers: one takes the close, one the reclassify run; both held at a lock, then killed."""
    month, first, end = data["month"], data["first"], data["end"]
    _, lock = CLOSE_POINTS[rep % len(CLOSE_POINTS)]
    month_key = (_MONTH_LOCK, month.toordinal())
    held_day = first + timedelta(days=1 + rep % (RECLASSIFY_DAYS - 1))
    day_key = (CLASSIFY_DAY_LOCK, held_day.toordinal())
    holder = Holder(url)
    pair: list[Worker] = []
    try:
        if lock == "advisory":
            holder.hold_advisory(month_key)
        else:
            holder.hold_table(lock)
        holder.hold_advisory(day_key)
        pair += [Worker(env, log).launch(), Worker(env, log).launch()]
        for worker in pair:
            worker.ready()
        enqueue(broker, "apps.ledger.tasks.period_close", f"{month:%Y-%m}")
        wait_until(lambda: lock_waiters(url, lock, month_key), 60, f"the close to wait at {lock}")
        enqueue(broker, "apps.classification.tasks.reclassify_run", first.isoformat(), end.isoformat())
        wait_until(lambda: lock_waiters(url, "advisory", day_key), 60, "the reclassify run to wait at its day")
        # Two days run at once (RECLASSIFY_WORKERS): the day before the held one may still be
        # committing while the held one waits; it commits, the held one does not.
        next_day = RECLASSIFY_RUN.format("next_day")
        wait_until(lambda: scalar(url, next_day) == held_day, 30, "the days before the held one to commit")
    finally:
        for worker in pair:
            worker.kill()  # also when the test failed: a worker left running takes later tests' tasks
        holder.release()
        holder.close()
    wait_until(lambda: no_orphans(url), 30, "the killed jobs' sessions to end")
    assert scalar(url, "SELECT status FROM ledger_period WHERE month = %s", [month]) in (None, "open")
    assert not scalar(url, "SELECT count(*) FROM ledger_journalline WHERE period = %s", [month])
    assert scalar(url, RECLASSIFY_RUN.format("status")) == "running"


FINDINGS = "SELECT kind, period, business_line, figures::text FROM ledger_finding ORDER BY 1, 2, 3, 4"
# What the jobs write, compared row for row with the run nothing interrupted.
JOB_OUTPUTS = {"journal lines": JOURNAL, "findings": FINDINGS, "class rows": CLASSES}


def jobs_measure(
    url: str, clean_url: str, sent: dict[int, set[str]], reference: subprocess.Popen[str]
) -> Callable[[Outcome], None]:
    """A row's measure for the killed jobs, by SQL: the records they read (sent against stored)
    plus what they wrote (the clean run's rows against this run's): a row of the clean run
    missing here is lost, a row here that the clean run has not is a duplicate."""

    def measure(outcome: Outcome) -> None:
        if reference.poll() is None:
            reference.wait(120)
        records = [record_counts(url, source, ids) for source, ids in sent.items()]
        outcome.sent = sum(len(ids) for ids in sent.values())
        outcome.stored = sum(r.stored for r in records)
        outcome.lost = sum(r.lost for r in records)
        outcome.duplicates = sum(r.duplicates for r in records)
        parts = [f"records {outcome.stored}/{outcome.sent}"]
        for name, sql in JOB_OUTPUTS.items():
            expected, found = Counter(rows(clean_url, sql)), Counter(rows(url, sql))
            missing, extra = sum((expected - found).values()), sum((found - expected).values())
            outcome.sent += sum(expected.values())
            outcome.stored += sum(found.values())
            outcome.lost += missing
            outcome.duplicates += extra
            parts.append(f"{name} {sum(found.values())}/{sum(expected.values())}" + (
                f" ({missing} missing, {extra} extra)" if missing or extra else ""
            ))  # fmt: skip
        outcome.counted = ", ".join(parts) + " of the clean run"

    return measure


@pytest.mark.parametrize("rep", range(REPEATS))
def test_a_close_and_a_reclassify_killed_with_their_worker_finish_as_a_clean_run(
    rep, suite, jobs_data, workers, fault_row
):
    month, first, end = jobs_data["month"], jobs_data["first"], jobs_data["end"]
    url, env = suite.database(f"jobs{rep}")
    clean_url, clean_env = suite.database(f"jobs{rep}_clean")
    suite.pg.copy("faults", f"jobs{rep}")
    suite.pg.copy("faults", f"jobs{rep}_clean")
    reference = ops_start(
        clean_env, "clean", "--month", f"{month:%Y-%m}", "--from", first.isoformat(), "--to", end.isoformat()
    )
    where = CLOSE_POINTS[rep % len(CLOSE_POINTS)][0]
    held = 2 + rep % (RECLASSIFY_DAYS - 1)
    row = fault_row(
        f"(c) kill -9 workers: close {where}, reclassify day {held}",
        jobs_measure(url, clean_url, jobs_data["sent"], reference),
        unit="rec+rows",
        note="both redelivered",
    )
    log = suite.workdir / f"worker-jobs{rep}.log"
    broker = env["CELERY_BROKER_URL"]

    kill_both_mid_job(url, env, broker, jobs_data, rep, log)

    # A new worker gets both tasks again from Redis (they were never acknowledged) and finishes them.
    workers.append(Worker(env, log).start())
    wait_until(
        lambda: (
            scalar(url, "SELECT status FROM ledger_period WHERE month = %s", [month]) == "closed"
            and scalar(url, RECLASSIFY_RUN.format("status")) == "done"
        ),
        90,
        "the redelivered close and reclassify run to finish",
        0.5,
    )
    ops_wait(reference)
    row.measure()

    assert rows(url, JOURNAL) == rows(clean_url, JOURNAL)
    assert rows(url, JOURNAL), "the close booked nothing"
    assert rows(url, FINDINGS) == rows(clean_url, FINDINGS)
    assert scalar(url, "SELECT count(*) FROM ledger_periodevent WHERE action = 'close'") == 1
    assert_ledger_balances(url)
    assert scalar(url, RECLASSIFY_RUN.format("count(*)")) == 1  # resumed, not run again
    assert rows(url, CLASSES) == rows(clean_url, CLASSES)
    assert rows(url, CLASSES), "the reclassify run wrote nothing"
    for worker in workers:
        worker.kill()
    workers.clear()
    suite.pg.execute("postgres", f'DROP DATABASE "jobs{rep}" WITH (FORCE)')
    suite.pg.execute("postgres", f'DROP DATABASE "jobs{rep}_clean" WITH (FORCE)')


# --- (d): webhook receivers answering 500 ------------------------------------------------


NOTIFICATIONS = (
    "SELECT a.title, n.channel_id, n.attempt, n.status, n.error FROM alerts_notification n "
    "JOIN alerts_alert a ON a.id = n.alert_id WHERE a.title LIKE %s ORDER BY n.attempt"
)
STOPPED = "the worker stopped while sending"  # the sweep's error for an attempt left `sending`


def deliveries(url: str, prefix: str) -> dict[tuple[str, int], list[tuple[int, str, str]]]:
    """Per (alert title, channel): its attempts in order, (attempt, status, error)."""
    found: dict[tuple[str, int], list[tuple[int, str, str]]] = {}
    for title, channel, attempt, status, error in rows(url, NOTIFICATIONS, [f"{prefix}-%"]):
        found.setdefault((title, channel), []).append((attempt, status, error))
    return found


# Per (alert, channel) of a broadcast: delivered (a `sent` attempt), marked failed (none sent, the
# last attempt failed), lost (neither), and `sent` attempts beyond the first (duplicates).
DELIVERY_COUNTS = """
WITH pairs AS (
    SELECT a.id AS alert_id, c.id AS channel_id FROM alerts_alert a CROSS JOIN alerts_channel c
    WHERE a.title LIKE %(alerts)s AND c.name LIKE %(channels)s
), tried AS (
    SELECT alert_id, channel_id, count(*) FILTER (WHERE status = 'sent') AS sent,
           (array_agg(status ORDER BY attempt DESC))[1] AS last
    FROM alerts_notification GROUP BY alert_id, channel_id
)
SELECT count(*), count(*) FILTER (WHERE t.sent > 0), count(*) FILTER (WHERE t.sent = 0 AND t.last = 'failed'),
       count(*) FILTER (WHERE coalesce(t.sent, 0) = 0 AND coalesce(t.last, '') <> 'failed'),
       coalesce(sum(t.sent - 1) FILTER (WHERE t.sent > 1), 0)
FROM pairs p LEFT JOIN tried t USING (alert_id, channel_id)
"""


def deliveries_measure(url: str, prefix: str, hooks: list[Hook]) -> Callable[[Outcome], None]:
    """A row's measure for the alerts, by SQL: every delivery of the broadcast."""

    def measure(outcome: Outcome) -> None:
        params = {"alerts": f"{prefix}-%", "channels": f"{prefix}-hook-%"}
        pairs, delivered, failed, lost, extra = (int(n) for n in rows(url, DELIVERY_COUNTS, params)[0])
        outcome.sent, outcome.stored, outcome.dropped = pairs, delivered, failed
        outcome.lost, outcome.duplicates = lost, extra
        answered = sum(sum(hook.answered(200).values()) for hook in hooks)
        outcome.counted = f"{delivered} delivered, {failed} marked failed; the receivers answered 200 {answered} times"

    return measure


@pytest.mark.parametrize("rep", range(REPEATS))
def test_alerts_to_failing_receivers_are_delivered_once_or_marked_failed(rep, suite, workers, fault_row):
    attempts = 1 + len(RETRY_DELAYS.split(","))
    log = suite.workdir / "worker-alerts.log"
    flaky, down = Hook(failing=True), Hook(failing=True)
    prefix = f"alert{rep}"
    killed = rep % 2 == 0  # the short form kills the worker; the full form alternates
    row = fault_row(
        f"(d) webhook 500s then back{', worker killed' if killed else ''}",
        deliveries_measure(suite.url, prefix, [flaky, down]),
        unit="deliveries",
    )
    try:
        workers.append(Worker(suite.env, log).start())
        ops(suite.env, "broadcast", "--urls", f"{flaky.url},{down.url}", "--count", str(ALERTS), "--prefix", prefix)
        wait_until(lambda: len(flaky.log) >= ALERTS, 60, "the first attempts to fail", 0.05)
        if killed:
            # Killed holding the retries it has scheduled, maybe in the middle of a send to the
            # other receiver, or between writing a retry and queueing its message. The new worker
            # gets the scheduled retries from Redis; the beat sweep, once they are due, sends the
            # retries whose message was never queued and marks failed what was left `sending`
            # (after 10 minutes in production, at once here).
            in_flight = scalar(
                suite.url,
                "SELECT count(*) FROM alerts_notification n JOIN alerts_alert a ON a.id = n.alert_id "
                "WHERE a.title LIKE %s AND n.status IN ('queued', 'sending')",
                [f"{prefix}-%"],
            )
            workers[-1].kill()
            row.note = f"worker killed with {in_flight} attempts queued or sending"
            time.sleep(max(float(d) for d in RETRY_DELAYS.split(",")))
            ops(suite.env, "sweep")
            flaky.failing = False  # the receiver comes back
            workers.append(Worker(suite.env, log).start())
        flaky.failing = False  # the receiver comes back

        def final() -> bool:
            found = deliveries(suite.url, prefix)
            return len(found) == 2 * ALERTS and all(p[-1][1] in {"sent", "failed"} for p in found.values())

        try:
            wait_until(final, 90, "every delivery to be sent or failed", 0.5)
        except AssertionError as exc:
            states = Counter(a[1] for pair in deliveries(suite.url, prefix).values() for a in pair)
            raise AssertionError(f"{exc}; attempts by status: {dict(states)}") from None
    finally:
        row.measure()
        flaky.close()
        down.close()
    found = deliveries(suite.url, prefix)
    flaky_channel, down_channel = sorted({channel for _, channel in found})  # created in this order
    titles = sorted(f"{prefix}-{n}" for n in range(ALERTS))
    sent = {t: [a for a in found[t, flaky_channel] if a[1] == "sent"] for t in titles}
    delivered = [t for t in titles if sent[t]]
    swept = sum(a[2] == STOPPED for pair in found.values() for a in pair)
    if killed:
        row.note += f"; {swept} left sending by the kill"
    assert (row.sent, row.lost, row.duplicates) == (2 * ALERTS, 0, 0), row
    answered = flaky.answered(200)
    for title in titles:
        flaky_last, down_last = found[title, flaky_channel][-1], found[title, down_channel][-1]
        # Delivered exactly once, or marked failed and never delivered.
        assert (flaky_last[1], len(sent[title]), answered[title]) in {("sent", 1, 1), ("failed", 0, 0)}, title
        assert down_last[1] == "failed" and not [a for a in found[title, down_channel] if a[1] == "sent"]
        made = len(found[title, down_channel])  # each attempt a row: the receiver saw each once at most
        assert made - int(down_last[2] == STOPPED) <= down.answered(500)[title] <= made, title
    if not killed:
        assert delivered == titles  # it came back before the second attempt
        assert down.answered(500) == dict.fromkeys(titles, attempts)
    else:
        assert delivered, "no retry survived the worker"


# --- (e): the shipper's spool at its quota -----------------------------------------------


def test_a_full_spool_dropping_the_oldest_counts_every_record_it_lost(suite, tmp_path: Path, fault_row):
    key = suite.key()
    count, day = RECORDS, month_start(2) + timedelta(days=20)
    sent = list(records("drop", count, midnight(day), 24))
    registry = CollectorRegistry()

    def counted_dropped() -> int:
        return int(registry.get_sample_value("costplatform_shipper_dropped_records_total") or 0)

    def measure(outcome: Outcome) -> None:
        # The oldest went: the first `dropped` records, as the shipper counted them.
        oldest = frozenset(item["record_id"] for item in sent[: counted_dropped()])
        records_measure(suite.url, key.id, Sent.of(sent).ids, oldest)(outcome)

    row = fault_row("(e) spool full, drop-oldest, platform down", measure)
    gate = Gate(suite.platform.url)  # the platform unreachable (503) until opened
    try:
        with Pipeline(
            tmp_path, url=gate.url, key=key.secret, registry=registry, max_bytes=count * 100, segment_bytes=count * 10,
            flush_interval=0.05, backoff_base=0.05, backoff_cap=0.3,
        ) as pipeline:  # fmt: skip
            for n, item in enumerate(sent):
                pipeline.submit(item)
                if n % 100 == 99:
                    assert pipeline.sync(timeout=10)
            assert pipeline.sync(timeout=10)
            gate.is_open = True
            assert pipeline.flush(timeout=60)
    finally:
        gate.close()
    dropped = counted_dropped()
    row.note = f"{dropped} dropped and counted (the oldest)"
    row.measure()
    found = stored(suite.url, key.id)
    assert dropped > 0, "the spool never filled"
    assert (row.lost, row.duplicates) == (0, 0), row
    assert len(found.ids) + dropped == count and found.duplicates == 0
    kept = sent[dropped:]  # the oldest went: exactly the first `dropped` records
    assert_stored_once(found, Sent.of(kept))
    assert_ledger_balances(suite.url, settle(suite, day))


def test_a_full_spool_that_refuses_pushes_back_and_stores_every_record(suite, tmp_path: Path, fault_row):
    key = suite.key()
    count, day = RECORDS, month_start(2) + timedelta(days=21)
    sent = list(records("refuse", count, midnight(day), 24))
    row = fault_row("(e) spool full, refuse, platform down", records_measure(suite.url, key.id, Sent.of(sent).ids))
    registry = CollectorRegistry()
    gate = Gate(suite.platform.url)
    refusals = [0]
    with Pipeline(
        tmp_path, url=gate.url, key=key.secret, registry=registry, max_bytes=count * 60, segment_bytes=count * 10,
        when_full="refuse", flush_interval=0.05, backoff_base=0.05, backoff_cap=0.3,
    ) as pipeline:  # fmt: skip

        def produce() -> None:
            for first in range(0, count, 50):
                while not pipeline.submit_durable(sent[first : first + 50], timeout=10):
                    refusals[0] += 1  # backpressure: the producer waits and offers the records again
                    time.sleep(0.02)

        producer = threading.Thread(target=produce)
        producer.start()
        try:
            wait_until(lambda: refusals[0] > 0, 30, "the spool to refuse")
        finally:
            gate.is_open = True
            producer.join(60)
        assert pipeline.flush(timeout=60)
    gate.close()
    dropped = int(registry.get_sample_value("costplatform_shipper_dropped_records_total") or 0)
    row.note = f"producer refused {refusals[0]} times and waited; the shipper dropped {dropped}"
    row.measure()
    assert dropped == 0
    assert_stored_once(stored(suite.url, key.id), Sent.of(sent))
    assert_ledger_balances(suite.url, settle(suite, day))


# --- the table itself: it shows a loss when there is one -------------------------------


def test_the_table_counts_a_record_deleted_and_one_stored_twice(suite):
    """A control, not a fault: records shipped without trouble, then one deleted and another
    stored a second time (another ts) behind the platform's back, by SQL. Its row, counted the
    way every fault's is, must read lost 1 and dups 1; it is shown here and kept out of the table."""
    key = suite.key()
    day = month_start(2) + timedelta(days=22)
    stream = Stream(suite.platform.url, key.secret, "control", 50, midnight(day), 24, suite.workdir, RATE, key.id)
    stream.run().wait()
    sent = stream.sent()
    gone, twice = "control-0000007", "control-0000011"
    with psycopg.connect(suite.url) as conn:
        conn.execute("DELETE FROM ingest_record WHERE source_id = %s AND record_id = %s", [key.id, gone])
        columns = [c for (c,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'ingest_record' "
            "AND column_name <> 'ts' ORDER BY ordinal_position"
        )]  # fmt: skip
        names = ", ".join(columns)
        conn.execute(
            f"INSERT INTO ingest_record (ts, {names}) SELECT ts + interval '1 second', {names} "
            "FROM ingest_record WHERE source_id = %s AND record_id = %s",
            [key.id, twice],
        )
    control = Outcome("(control) one record deleted, one stored twice", measure_with=records_measure(
        suite.url, key.id, sent.ids
    )).measure()  # fmt: skip
    table = outcome_table([control])
    print("\n".join(table))
    assert (control.sent, control.stored, control.lost, control.duplicates) == (50, 50, 1, 1)
    assert table[2].split()[8:12] == ["50", "50", "1", "1"], table[2]
    assert table[-1] == "0 of 1 faults survived; lost: 1; duplicates: 1"
