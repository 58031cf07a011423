"""The moving parts of the fault suite: a Celery worker that can be killed, the shipper stream
process, a gate in front of the platform, the ops runner, and the checks (plain SQL on the
database under test, so a check never trusts the code it checks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg

from tests.faults.stream import TOKEN_FIELDS, Sent, records
from tests.processes import ROOT

FULL = os.environ.get("FAULTS_FULL") == "1"
REPEATS = int(os.environ.get("FAULTS_REPEATS") or (3 if FULL else 1))
RECORDS = int(os.environ.get("FAULTS_RECORDS") or (20_000 if FULL else 1_000))
RATE = float(os.environ.get("FAULTS_RATE") or (4_000 if FULL else 1_000))  # records a second into the shipper
ALERTS = 30 if FULL else 6

# Retries of alert deliveries (seconds): a receiver that comes back within them gets the alert.
RETRY_DELAYS = "3,1,1"  # the first long enough to kill a worker between attempts
# A task whose worker died unacknowledged is delivered again after this many seconds (Redis).
TRANSPORT_OPTIONS = {
    "visibility_timeout": 3, "unacked_restore_interval": 1, "unacked_restore_throttle": 1, "unacked_mutex_expire": 5,
}  # fmt: skip


def platform_env(database_url: str, broker_url: str) -> dict[str, str]:
    """The environment every platform process of the suite runs with (web, worker, ops)."""
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        CELERY_BROKER_TRANSPORT_OPTIONS=json.dumps(TRANSPORT_OPTIONS),
        SECRET_KEY="tests-only-secret",
        COSTPLATFORM_OUTBOUND_ALLOW="127.0.0.1/32",
        COSTPLATFORM_ALERTS_RETRY_DELAYS=RETRY_DELAYS,
        DJANGO_SETTINGS_MODULE="costplatform.settings",
    )
    return env


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"not within {timeout} s: {what}")


def ops(env: dict[str, str], *args: str) -> Any:
    """Run `python -m tests.faults.ops ARGS` on env's database; its JSON answer."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.faults.ops", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"ops {' '.join(args)} failed:\n{done.stdout}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ops_start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """The same, running alongside; finish with ops_wait."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.faults.ops", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ops_wait(proc: subprocess.Popen[str], timeout: float = 120) -> Any:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"ops failed:\n{out}\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])


def enqueue(broker_url: str, task: str, *args: str) -> None:
    """Send a task by name to the broker, for whichever worker takes it."""
    from costplatform.celery import app

    with app.connection_for_write(broker_url) as connection:
        app.send_task(task, list(args), connection=connection)


# --- processes -------------------------------------------------------------------------


class Worker:
    """`celery -A costplatform worker` (solo pool) in its own process group."""

    count = 0

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90) -> Worker:
        return self.launch().ready(timeout)

    def launch(self) -> Worker:
        Worker.count += 1
        command = [
            sys.executable, "-m", "celery", "-A", "costplatform", "worker", "--pool=solo", "--loglevel=INFO",
            "--without-heartbeat", "--without-gossip", "--without-mingle", "-n", f"faults{Worker.count}@%h",
        ]  # fmt: skip
        self.log = self.log.with_name(f"{self.log.stem.split('.')[0]}.{Worker.count}.log")  # one a process
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def ready(self, timeout: float = 90) -> Worker:
        def started() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {self.proc.returncode}:\n{self.tail()}")
            return b" ready." in self.log.read_bytes()

        wait_until(started, timeout, "the Celery worker to be ready", 0.2)
        return self

    def kill(self) -> None:
        """SIGKILL: the task in hand is neither finished nor acknowledged."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


@dataclass
class Stream:
    """The shipper process sending `count` records (see tests/faults/stream.py)."""

    url: str
    key: str
    prefix: str
    count: int
    start: datetime
    hours: int
    workdir: Path
    rate: float = 2000.0
    key_id: int = 0
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.progress_file = self.workdir / f"{self.prefix}.progress.json"
        self.spool = self.workdir / f"{self.prefix}.spool"
        self.log = self.workdir / f"{self.prefix}.shipper.log"

    def sent(self) -> Sent:
        return Sent.of(list(records(self.prefix, self.count, self.start, self.hours)))

    def run(self) -> Stream:
        command = [
            sys.executable, "-m", "tests.faults.stream", "--url", self.url, "--key", self.key,
            "--spool", str(self.spool), "--prefix", self.prefix, "--count", str(self.count),
            "--start", self.start.isoformat(), "--hours", str(self.hours), "--rate", str(self.rate),
            "--progress", str(self.progress_file), "--timeout", "90",
        ]  # fmt: skip
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        return self

    def progress(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.progress_file.read_text()))
        except (FileNotFoundError, ValueError):
            return {"submitted": 0}

    def wait_submitted(self, fraction: float, timeout: float = 60) -> None:
        wait_until(lambda: self.progress()["submitted"] >= self.count * fraction, timeout, f"{self.prefix} submitted")

    def finish(self, timeout: float = 120) -> int:
        """Wait for the shipper; its exit status (killed, and so not 0, when it overran)."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def wait(self, timeout: float = 120) -> dict[str, Any]:
        status = self.finish(timeout)
        summary = self.progress()
        assert status == 0, f"the shipper did not ship everything: {summary}\n{self.tail()}"
        return summary

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


class Gate:
    """A loopback reverse proxy to the platform that answers 503 while closed."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.is_open = False
        self.refused = 0
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if not gate.is_open:
                    gate.refused += 1
                    self._answer(503, b'{"detail": "closed"}')
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() in {"authorization", "content-type"}}
                request = urllib.request.Request(gate.target + self.path, data=body, headers=headers, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        self._answer(response.status, response.read())
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, exc.read())

            def _answer(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Hook:
    """A loopback webhook receiver that answers 500 while failing, else 200; logs (title, status)."""

    def __init__(self, failing: bool = True) -> None:
        self.failing = failing
        self.log: list[tuple[str, int]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = 500 if hook.failing else 200
                hook.log.append((json.loads(body).get("title", ""), status))
                data = b'{"ok": true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answered(self, status: int) -> Counter[str]:
        return Counter(title for title, got in list(self.log) if got == status)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- checks ------------------------------------------------------------------------------


@dataclass
class Stored:
    ids: Counter[str]
    tokens: dict[str, int]
    rollup_records: int
    rollup_tokens: dict[str, int]
    duplicates: int = field(init=False)

    def __post_init__(self) -> None:
        self.duplicates = sum(n - 1 for n in self.ids.values() if n > 1)


def stored(url: str, source_id: int) -> Stored:
    """The records of one source as stored, and the hourly usage rollup's sums for it."""
    sums = ", ".join(f"coalesce(sum({name}), 0)" for name in TOKEN_FIELDS)
    with psycopg.connect(url) as conn:
        ids = Counter(
            r for (r,) in conn.execute("SELECT record_id FROM ingest_record WHERE source_id = %s", [source_id])
        )
        row = conn.execute(f"SELECT {sums} FROM ingest_record WHERE source_id = %s", [source_id]).fetchone()
        rollup = conn.execute(
            f"SELECT coalesce(sum(records), 0), {sums} FROM ingest_hourlyusage WHERE source_id = %s", [source_id]
        ).fetchone()
    assert row is not None and rollup is not None
    return Stored(
        ids, dict(zip(TOKEN_FIELDS, row, strict=True)), rollup[0], dict(zip(TOKEN_FIELDS, rollup[1:], strict=True))
    )


def assert_stored_once(found: Stored, sent: Sent) -> None:
    """Every record sent stored exactly once; the record and rollup token sums equal what was sent."""
    missing = sent.ids - found.ids.keys()
    extra = found.ids.keys() - sent.ids
    assert not missing, f"{len(missing)} records lost, e.g. {sorted(missing)[:3]}"
    assert not extra, f"{len(extra)} records stored that were not sent"
    assert found.duplicates == 0, f"{found.duplicates} duplicates"
    assert found.tokens == sent.tokens, (found.tokens, sent.tokens)
    assert found.rollup_records == len(sent.ids), (found.rollup_records, len(sent.ids))
    assert found.rollup_tokens == sent.tokens, (found.rollup_tokens, sent.tokens)


def assert_ledger_balances(url: str, state: dict[str, Any] | None = None) -> None:
    """Every journal entry balances, every month's trial balance balances, and (when the
    settle op's state is given) each month's booked expense equals its priced total."""
    with psycopg.connect(url) as conn:
        unbalanced = conn.execute(
            "SELECT count(*) FROM (SELECT entry_id FROM ledger_journalline GROUP BY entry_id "
            "HAVING sum(debit) <> sum(credit)) u"
        ).fetchone()
        trial = conn.execute(
            "SELECT period, currency, sum(debit), sum(credit) FROM ledger_journalline GROUP BY 1, 2"
        ).fetchall()
    assert unbalanced == (0,), f"{unbalanced} journal entries do not balance"
    assert all(debits == credits for _, _, debits, credits in trial), trial
    for month, figures in (state or {}).items():
        assert all(book["balanced"] for book in figures["trial_balance"]), (month, figures)
        for total in figures["totals"]:
            assert total["booked"] == total["priced"], (month, total)


JOURNAL = """
SELECT e.kind, e.period, e.day, e.adjusts, e.currency, a.code, l.cost_centre, coalesce(m.name, ''),
       l.pool_id, l.debit, l.credit, l.tokens
FROM ledger_journalline l JOIN ledger_journalentry e ON e.id = l.entry_id JOIN ledger_account a ON a.id = l.account_id
LEFT JOIN ingest_servedmodel m ON m.id = l.model_id ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
"""
CLASSES = """
SELECT c.hour, c.source_id, m.name, d.dims::text, s.version, r.name, c.component, c.tokens
FROM classification_hourlyclass c JOIN ingest_servedmodel m ON m.id = c.model_id
JOIN ingest_dimset d ON d.id = c.dims_id JOIN classification_ruleset s ON s.id = c.ruleset_id
JOIN classification_reason r ON r.id = c.reason_id ORDER BY 1, 2, 3, 4, 5, 6, 7
"""


def rows(url: str, sql: str, params: list[Any] | dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql.encode(), params).fetchall()


def scalar(url: str, sql: str, params: list[Any] | None = None) -> Any:
    found = rows(url, sql, params)
    return found[0][0] if found else None


def lock_waiters(url: str, kind: str, key: tuple[int, int] = (0, 0)) -> int:
    """Sessions waiting for a lock: a table's, or (kind 'advisory') the advisory lock `key`."""
    if kind == "advisory":
        where, params = "l.locktype = 'advisory' AND l.classid = %s::oid AND l.objid = %s::oid", list(key)
    else:
        where, params = f"l.relation = '{kind}'::regclass", []
    return int(scalar(url, f"SELECT count(*) FROM pg_locks l WHERE NOT l.granted AND {where}", params) or 0)


# --- the table of faults survived -------------------------------------------------------
#
# Each fault is a row, counted by SQL on the database under test whatever the test concluded:
# a test makes its row before it injects anything, measures it before it asserts, and the
# fixture that made it measures it again at teardown if the test stopped before measuring.
# `survived` is the test's own result, so a failed test is a row with its loss, not a gap.


@dataclass
class Outcome:
    """One fault: what should be there (`sent`), what is (`stored`), and the difference, in
    `unit`s. `dropped`: given up and counted by the product (records the spool dropped and
    metered, alerts marked failed); `lost`: gone without that."""

    fault: str
    unit: str = "records"
    sent: int = 0
    stored: int = 0
    lost: int = 0
    duplicates: int = 0
    dropped: int = 0
    note: str = ""
    survived: bool = False
    measured: bool = False
    counted: str = ""  # what the count itself noticed
    measure_with: Callable[[Outcome], None] | None = field(default=None, repr=False)

    def measure(self) -> Outcome:
        """Count it now (again, if it was counted before: the last count stands)."""
        if self.measure_with is not None:
            self.measure_with(self)
            self.measured = True
        return self


OUTCOMES: list[Outcome] = []
Row = Callable[..., Outcome]  # the fault_row fixture: a row made and put in the table

RECORD_COUNTS = """
WITH sent(record_id) AS (SELECT unnest(%(sent)s::text[])),
     kept(record_id) AS (SELECT unnest(%(kept)s::text[])),
     stored AS (SELECT record_id, count(*) AS n FROM ingest_record WHERE source_id = %(source)s GROUP BY record_id)
SELECT (SELECT coalesce(sum(n), 0) FROM stored),
       (SELECT count(*) FROM kept k WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.record_id = k.record_id)),
       (SELECT coalesce(sum(n - 1), 0) FROM stored WHERE n > 1),
       (SELECT count(*) FROM stored s WHERE NOT EXISTS (SELECT 1 FROM sent t WHERE t.record_id = s.record_id)),
       (SELECT coalesce(sum(records), 0) FROM ingest_hourlyusage WHERE source_id = %(source)s)
"""


@dataclass
class RecordCounts:
    stored: int
    lost: int
    duplicates: int
    strangers: int  # stored, never sent
    rollup: int  # records the hourly rollup counts


def record_counts(url: str, source_id: int, sent: set[str], dropped: frozenset[str] = frozenset()) -> RecordCounts:
    """By SQL: one source's records against the ids sent; a record the shipper dropped (and
    counted) is not lost."""
    params = {"sent": sorted(sent), "kept": sorted(sent - dropped), "source": source_id}
    found = rows(url, RECORD_COUNTS, params)[0]
    return RecordCounts(*(int(n) for n in found))


def records_measure(
    url: str, source_id: int, sent: set[str], dropped: frozenset[str] = frozenset()
) -> Callable[[Outcome], None]:
    """A row's measure: the source's records, sent against stored."""

    def measure(outcome: Outcome) -> None:
        counts = record_counts(url, source_id, sent, dropped)
        outcome.sent, outcome.stored = len(sent), counts.stored
        outcome.lost, outcome.duplicates, outcome.dropped = counts.lost, counts.duplicates, len(dropped)
        strangers = [f"{counts.strangers} stored that were never sent"] if counts.strangers else []
        rollup = "rollup = records" if counts.rollup == counts.stored else f"rollup counts {counts.rollup}"
        outcome.counted = "; ".join([*strangers, rollup])

    return measure


def outcome_table(outcomes: list[Outcome] | None = None) -> list[str]:
    outcomes = OUTCOMES if outcomes is None else outcomes
    header = (
        f"{'fault':<62} {'unit':<11} {'sent':>7} {'stored':>7} {'lost':>5} {'dups':>5} {'dropped':>7}  survived  note"
    )
    lines = [header, "-" * len(header)]
    for o in outcomes:
        counts = (
            f"{o.sent:>7} {o.stored:>7} {o.lost:>5} {o.duplicates:>5} {o.dropped:>7}"
            if o.measured
            else f"{'not counted':>35}"
        )
        note = "; ".join(n for n in (o.note, o.counted) if n)
        lines.append(f"{o.fault:<62} {o.unit:<11} {counts}  {'yes' if o.survived else 'NO':<8}  {note}")
    survived = sum(o.survived for o in outcomes)
    lost, dups = sum(o.lost for o in outcomes), sum(o.duplicates for o in outcomes)
    lines.append(f"{survived} of {len(outcomes)} faults survived; lost: {lost}; duplicates: {dups}")
    return lines
