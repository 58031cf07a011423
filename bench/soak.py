"""Load and soak (`make soak`): the platform under gunicorn with a real Celery worker and beat, all
on loopback, takes a sustained ingest at a fraction (default 50 %) of the maximum measured by a
short ramp in the same run, for `--minutes`, while the dashboards (/overview/, /waste/) and the
usage API are read concurrently.

Reports errors (must be 0), ingest latency p50/p95/p99 per request, records sent = stored (and
token sums), and the RSS of every process (gunicorn master and workers, the Celery worker and its
pool, beat, the PostgreSQL backends of the soak database) at the start, the end and the peak,
with a pass or fail for flatness. The database (default `costplatform_soak`) is dropped and
recreated; the results are printed and written as JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import http.client
import http.cookiejar
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.ingest import RecordMaker  # noqa: E402
from tests.processes import PlatformServer  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/costplatform_soak"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/13"  # not 15 or 14: make test's two workers
MIB = 1024 * 1024
# A process is flat when its RSS at the end (median of the last samples) is within this of its
# RSS at the start of the sustained phase (median of the first samples).
FLAT_RATIO = 0.10
FLAT_SLACK = 24 * MIB
SAMPLES_SMOOTHED = 5


# --------------------------------------------------------------------------------------------
# Request bodies: templates with placeholders, so that every batch has new record ids at the
# current time without generating records on the hot path.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    body: bytes
    records: int
    prompt: int
    completion: int


def templates_make(count: int, batch: int, seed: int = 1) -> list[Template]:
    """`count` bodies of `batch` records of the ingest bench's catalogue. In each, the record ids,
    the ts and the first 8 hex digits of the prompt hashes are placeholders filled per batch, so
    duplicates (same prompt hash) happen within a batch, as in traffic, not across the run."""
    now = datetime.now(UTC)
    maker = RecordMaker(seed, now - timedelta(hours=1), now, count * batch)
    out = []
    for _ in range(count):
        records = [maker.record() for _ in range(batch)]
        for i, rec in enumerate(records):
            rec["record_id"] = f"soak-@@B@@-{i}"
            rec["ts"] = "@@TS@@"
            if "prompt_hash" in rec:
                rec["prompt_hash"] = "@@H@@" + rec["prompt_hash"][8:]
        prompt = sum(r["tokens"].get("prompt", 0) for r in records)
        completion = sum(r["tokens"].get("completion", 0) for r in records)
        out.append(Template(json.dumps({"records": records}).encode(), batch, prompt, completion))
    return out


def body_fill(template: Template, number: int) -> bytes:
    ts = datetime.now(UTC).replace(microsecond=0).isoformat().encode()
    body = template.body.replace(b"@@B@@", str(number).encode()).replace(b"@@TS@@", ts)
    return body.replace(b"@@H@@", f"{number % 0xFFFFFFFF:08x}".encode())


# --------------------------------------------------------------------------------------------
# Ingest: a ramp (as fast as the clients go) and a paced phase.
# --------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the clients sent and saw; shared between threads under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    batches: int = 0  # batch numbers handed out
    sent_records: int = 0  # records of batches answered 200 with every record accepted
    sent_prompt: int = 0
    sent_completion: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # seconds per request, paced phase
    lags: list[float] = field(default_factory=list)  # seconds a request started after its slot

    def next_batch(self) -> int:
        with self.lock:
            self.batches += 1
            return self.batches


class Ingester:
    def __init__(self, port: int, secret: str, templates: list[Template], tally: Tally) -> None:
        self.port, self.templates, self.tally = port, templates, tally
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def send(self, conn: http.client.HTTPConnection, number: int) -> float | None:
        template = self.templates[number % len(self.templates)]
        body = body_fill(template, number)
        started = time.perf_counter()
        try:
            conn.request("POST", "/api/v1/records", body=body, headers=self.headers)
            response = conn.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._error(f"batch {number}: {exc!r}")
            conn.close()
            return None
        elapsed = time.perf_counter() - started
        accepted = json.loads(payload).get("accepted") if response.status == 200 else None
        if accepted != template.records:
            self._error(f"batch {number}: HTTP {response.status} accepted {accepted}: {payload[:300]!r}")
            return None
        with self.tally.lock:
            self.tally.sent_records += template.records
            self.tally.sent_prompt += template.prompt
            self.tally.sent_completion += template.completion
        return elapsed

    def _error(self, message: str) -> None:
        with self.tally.lock:
            self.tally.errors.append(message)

    def flat_out(self, seconds: float, clients: int) -> tuple[int, float]:
        """Send back to back from `clients` threads for `seconds`: (records accepted, seconds)."""
        before = self.tally.sent_records
        deadline = time.monotonic() + seconds

        def client() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            while time.monotonic() < deadline:
                self.send(conn, self.tally.next_batch())
            conn.close()

        started = time.perf_counter()
        _run_threads(client, clients)
        return self.tally.sent_records - before, time.perf_counter() - started

    def paced(self, rate: float, seconds: float, clients: int) -> tuple[float, int]:
        """Batch k is due at start + k * batch / rate; `clients` threads take the batches in order
        and send each at its time (or at once when late). The phase ends after `seconds` even when
        the server fell behind: the batches not sent by then are counted, not sent. Returns the
        phase's wall seconds and the number of batches left unsent."""
        batch = self.templates[0].records
        interval = batch / rate
        total = int(seconds / interval)
        slots = iter(range(total))
        lock = threading.Lock()
        start = time.monotonic() + 0.5
        end = start + seconds
        sent = [0]

        def client() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            while time.monotonic() < end:
                with lock:
                    slot = next(slots, None)
                    sent[0] += slot is not None
                if slot is None:
                    break
                due = start + slot * interval
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                lag = max(0.0, time.monotonic() - due)
                elapsed = self.send(conn, self.tally.next_batch())
                with self.tally.lock:
                    self.tally.lags.append(lag)
                    if elapsed is not None:
                        self.tally.latencies.append(elapsed)
            conn.close()

        _run_threads(client, clients)
        return time.monotonic() - start, total - sent[0]


def _run_threads(target: Any, count: int) -> None:
    threads = [threading.Thread(target=target, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --------------------------------------------------------------------------------------------
# Readers: the dashboards and the usage API, logged in as the superuser.
# --------------------------------------------------------------------------------------------


class Reader:
    PAGES = ("/overview/", "/waste/", "/api/v1/usage")

    def __init__(self, base: str, username: str, password: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.username, self.password = username, password
        self.times: dict[str, list[float]] = {p: [] for p in self.PAGES}
        self.errors: list[str] = []
        self.stop = threading.Event()

    def login(self) -> None:
        page = self.opener.open(f"{self.base}/login/", timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, "no CSRF token on /login/"
        form = {"username": self.username, "password": self.password, "csrfmiddlewaretoken": token.group(1)}
        request = urllib.request.Request(
            f"{self.base}/login/", data=urllib.parse.urlencode(form).encode(), headers={"Referer": f"{self.base}/"}
        )
        landed = self.opener.open(request, timeout=30)
        assert "/login/" not in landed.geturl(), "login failed"

    def url(self, page: str) -> str:
        if page != "/api/v1/usage":
            return f"{self.base}{page}"
        now = datetime.now(UTC)
        query = {"from": (now - timedelta(hours=6)).isoformat(), "to": now.isoformat()}
        return f"{self.base}{page}?" + urllib.parse.urlencode(
            {**query, "granularity": "hour", "group_by": "business_line"}
        )

    def run(self, pause: float) -> None:
        while not self.stop.is_set():
            for page in self.PAGES:
                started = time.perf_counter()
                try:
                    with self.opener.open(self.url(page), timeout=120) as response:
                        response.read()
                        landed = response.geturl()
                    if "/login/" in landed:
                        self.errors.append(f"{page}: sent to the login page")
                    else:
                        self.times[page].append(time.perf_counter() - started)
                except Exception as exc:  # every failure is an error of the run
                    self.errors.append(f"{page}: {exc!r}")
                self.stop.wait(pause)


# --------------------------------------------------------------------------------------------
# Memory of every process
# --------------------------------------------------------------------------------------------


def _status(pid: int) -> dict[str, int]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            out[key] = int(value.split()[0]) * 1024
    return out


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class MemorySampler:
    """Every `every` seconds, RSS and anonymous RSS of each named process. The PostgreSQL
    backends come and go (Django closes a connection after CONN_MAX_AGE), so they are summed."""

    def __init__(self, roles: dict[str, int], database_url: str, every: float) -> None:
        self.roles, self.every = roles, every
        self.database = urllib.parse.urlsplit(database_url).path.lstrip("/")
        self.admin_url = database_url
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()

    def processes(self) -> dict[str, int]:
        out = {}
        for role, pid in self.roles.items():
            out[role] = pid
            for n, child in enumerate(_children(pid), 1):
                out[f"{role} child {n}"] = child
        return out

    def backends(self) -> list[int]:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [self.database]
            ).fetchall()
        return [r[0] for r in rows]

    def sample(self) -> dict[str, Any]:
        row: dict[str, Any] = {"t": time.time()}
        for name, pid in self.processes().items():
            status = _status(pid)
            if status:
                row[name] = {"pid": pid, "rss": status.get("VmRSS", 0), "anon": status.get("RssAnon", 0)}
        pids = self.backends()
        statuses = [_status(pid) for pid in pids]
        row["postgres backends"] = {
            "count": len(pids),
            "rss": sum(s.get("VmRSS", 0) for s in statuses),
            "anon": sum(s.get("RssAnon", 0) for s in statuses),
        }
        return row

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self.sample())
            self.stop.wait(self.every)

    def report(self, since: float) -> dict[str, Any]:
        """Per process: start, end, peak (RSS and anonymous RSS) over the samples after `since`,
        and whether the anonymous RSS stayed flat (a process that kept its pid throughout)."""
        samples = [s for s in self.samples if s["t"] >= since]
        names = sorted({k for s in samples for k in s if k != "t"})
        out = {}
        for name in names:
            series = [s[name] for s in samples if name in s]
            pids = {p.get("pid") for p in series}
            if len(series) < 2:
                continue
            k = min(SAMPLES_SMOOTHED, max(1, len(series) // 4))
            start = statistics.median(p["anon"] for p in series[:k])
            end = statistics.median(p["anon"] for p in series[-k:])
            flat = end - start <= max(FLAT_RATIO * start, FLAT_SLACK)
            out[name] = {
                "start_rss": series[0]["rss"],
                "end_rss": series[-1]["rss"],
                "peak_rss": max(p["rss"] for p in series),
                "start_anon": int(start),
                "end_anon": int(end),
                "peak_anon": max(p["anon"] for p in series),
                "same_process": len(pids) == 1,
                "flat": flat,
                "samples": len(series),
            }
            if name == "postgres backends":
                out[name]["count_start"] = series[0]["count"]
                out[name]["count_end"] = series[-1]["count"]
        return out


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def celery_spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "costplatform", *args],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def stored_totals(database_url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(database_url) as conn:
        records, prompt, completion = conn.execute(
            "SELECT count(*), coalesce(sum(prompt), 0), coalesce(sum(completion), 0) FROM ingest_record"
        ).fetchone()
        (rollup,) = conn.execute("SELECT coalesce(sum(records), 0) FROM ingest_hourlyusage").fetchone()
        (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return {
        "records": int(records),
        "prompt": int(prompt),
        "completion": int(completion),
        "rollup_records": int(rollup),
        "database_bytes": int(size),
    }


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    return {"n": len(ordered), "p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": at(1.0)}


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30, help="length of the sustained phase (default 30)")
    parser.add_argument("--ramp-seconds", type=float, default=30, help="the flat-out phase that measures the max")
    parser.add_argument("--fraction", type=float, default=0.5, help="sustained rate / measured max (default 0.5)")
    parser.add_argument("--rate", type=float, default=0, help="sustained records/s (skips the ramp)")
    parser.add_argument("--batch", type=int, default=1000, help="records per request (default 1000)")
    parser.add_argument("--clients", type=int, default=3, help="ingest client threads (default 3)")
    parser.add_argument("--read-pause", type=float, default=1.0, help="seconds between two reads of the reader")
    parser.add_argument("--sample-every", type=float, default=10.0, help="seconds between memory samples")
    parser.add_argument("--keep", action="store_true", help="keep the soak database afterwards")
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "results" / "soak")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    database = urllib.parse.urlsplit(database_url).path.lstrip("/")
    if "soak" not in database:
        sys.exit(f"refusing to recreate {database!r}: the soak database's name must contain 'soak'")
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("CELERY_BROKER_URL", DEFAULT_BROKER_URL)
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"soak: setting up {database} (load average {load_average()})", flush=True)
    server = PlatformServer(args.workdir, database=database).setup()
    _purge_broker(os.environ["CELERY_BROKER_URL"])
    env = server.env
    worker = celery_spawn(
        ["worker", "--concurrency", "2", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
        env,
        args.workdir / "worker.log",
    )
    beat = celery_spawn(["beat", "--loglevel", "INFO"], env, args.workdir / "beat.log")
    server.start()
    assert server.proc is not None
    try:
        result = _soak(args, server, worker, beat)
    finally:
        server.stop()
        for process in (beat, worker):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        if not args.keep:
            _drop(server.database_url)
    results = REPO / "bench" / "results"
    out = results / f"soak-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    _print(result)
    print(f"\nwritten to {out}")
    return 0 if result["pass"] else 1


def _soak(
    args: argparse.Namespace, server: PlatformServer, worker: subprocess.Popen[bytes], beat: subprocess.Popen[bytes]
) -> dict[str, Any]:
    assert server.proc is not None
    tally = Tally()
    templates = templates_make(8, args.batch)
    ingester = Ingester(server.port, server.key, templates, tally)
    ingester.flat_out(5, args.clients)  # warm up: connections, caches, the first dim sets
    started_at = datetime.now(UTC)
    # The readers run from the ramp on: the maximum is measured under the read load the
    # sustained phase carries (a read-free maximum is not one the server can hold while read).
    reader = Reader(server.url, "tester", "pw-for-tests-only")
    reader.login()
    reading = threading.Thread(target=reader.run, args=(args.read_pause,), daemon=True)
    reading.start()
    if args.rate:
        ramp = {"records": 0, "seconds": 0.0, "max_per_s": None}
        rate = args.rate
    else:
        records, seconds = ingester.flat_out(args.ramp_seconds, args.clients)
        ramp = {"records": records, "seconds": round(seconds, 1), "max_per_s": round(records / seconds)}
        rate = args.fraction * records / seconds
    print(f"soak: ramp {ramp}; sustained rate {rate:,.0f} records/s for {args.minutes} min", flush=True)
    if tally.errors:
        reader.stop.set()
        return {"pass": False, "errors": tally.errors[:20], "ramp": ramp}

    roles = {"gunicorn master": server.proc.pid, "celery worker": worker.pid, "celery beat": beat.pid}
    sampler = MemorySampler(roles, server.database_url, args.sample_every)
    threads = [threading.Thread(target=sampler.run, daemon=True), reading]
    load_start = load_average()
    phase_start = time.time()
    threads[0].start()
    wall, unsent = ingester.paced(rate, args.minutes * 60, args.clients)
    reader.stop.set()
    sampler.stop.set()
    for t in threads:
        t.join()
    load_end = load_average()
    stored = stored_totals(server.database_url)
    memory = sampler.report(phase_start)
    sent = {"records": tally.sent_records, "prompt": tally.sent_prompt, "completion": tally.sent_completion}
    paced_records = len(tally.latencies) * args.batch
    alive = {"celery worker": worker.poll() is None, "celery beat": beat.poll() is None}
    errors = tally.errors + reader.errors
    checks = {
        "no errors": not errors,
        "sent = stored": stored["records"] == sent["records"]
        and stored["prompt"] == sent["prompt"]
        and stored["completion"] == sent["completion"]
        and stored["rollup_records"] == sent["records"],
        "kept pace (p99 lag < 5 s, every batch sent)": bool(tally.lags)
        and percentiles(tally.lags)["p99_ms"] < 5000
        and not unsent,
        "memory flat": all(m["flat"] for m in memory.values()),
        "celery alive": all(alive.values()),
    }
    return {
        "commit": git_commit(),
        "started": started_at.isoformat(),
        "minutes": args.minutes,
        "batch": args.batch,
        "clients": args.clients,
        "ramp": ramp,
        "target_per_s": round(rate),
        "achieved_per_s": round(paced_records / wall) if wall else None,
        "batches_unsent": unsent,
        "ingest_latency": percentiles(tally.latencies),
        "lag": percentiles(tally.lags),
        "reads": {page: percentiles(times) for page, times in reader.times.items()},
        "sent": sent,
        "stored": stored,
        "errors": errors[:20],
        "error_count": len(errors),
        "memory": memory,
        "load_average": {"start": load_start, "end": load_end},
        "cpus": os.cpu_count(),
        "checks": checks,
        "pass": all(checks.values()),
    }


def _purge_broker(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def _drop(url: str) -> None:
    import psycopg

    parts = urllib.parse.urlsplit(url)
    admin = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def _print(result: dict[str, Any]) -> None:
    if "memory" not in result:
        print(json.dumps(result, indent=2, default=str))
        return
    print(f"\nsoak at {result['commit']}: {result['minutes']} min, ramp max {result['ramp']['max_per_s']} records/s, "
          f"target {result['target_per_s']}/s, achieved {result['achieved_per_s']}/s")  # fmt: skip
    print(f"ingest latency (per request of {result['batch']}): {result['ingest_latency']}")
    print(f"lag behind the schedule: {result['lag']}; batches not sent in time: {result['batches_unsent']}")
    for page, figures in result["reads"].items():
        print(f"read {page}: {figures}")
    print(f"sent {result['sent']}\nstored {result['stored']}")
    print(f"errors: {result['error_count']} {result['errors'][:3]}")
    print(
        f"{'process':<26} {'start RSS':>10} {'end RSS':>10} {'peak RSS':>10} {'start anon':>11} {'end anon':>10}  flat"
    )
    for name, m in result["memory"].items():
        print(
            f"{name:<26} {m['start_rss'] / MIB:>8.1f}Mi {m['end_rss'] / MIB:>8.1f}Mi {m['peak_rss'] / MIB:>8.1f}Mi "
            f"{m['start_anon'] / MIB:>9.1f}Mi {m['end_anon'] / MIB:>8.1f}Mi  {'yes' if m['flat'] else 'NO'}"
        )
    print(f"load average {result['load_average']} on {result['cpus']} CPUs")
    for name, ok in result["checks"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    print("PASS" if result["pass"] else "FAIL")


if __name__ == "__main__":
    raise SystemExit(main())
