#!/usr/bin/env python
"""Ingest benchmark: records/s of three ways to store the same generated token records.

  (a) a straightforward DRF ModelSerializer + ORM path (bench/naive), over HTTP, on a sample,
      saved row by row, and (a bulk) the same validation saved with one bulk_create a request;
  (b) the real ingest API (POST /api/v1/records) end to end over HTTP, batches of 5,000;
  (c) raw binary COPY of the same rows into ingest_record from one process;

plus the bytes each stored record takes (ingest_record partitions, heap + indexes + TOAST).

With --compare-ref REF, (b) runs a second time in the same run, on the same bodies, against the
code of another commit: a git worktree of REF (in a temporary directory, removed afterwards)
serving from its own gunicorn into its own database (DATABASE_URL's name + "_ref", migrated by
REF's migrations), so the two rates are measured side by side under the same conditions.

The server for (a) and (b) is gunicorn running costplatform.wsgi in other processes, with
bench.settings (the product's settings plus the bench.naive app and its URL). The request
bodies are generated and encoded before any timing starts, so the client costs little CPU.

The database named in DATABASE_URL (default costplatform_bench) is DROPPED and recreated;
its name must contain "bench". Run with `make bench` (BENCH_ARGS="--records 100000" for a
quick run). See docs/benchmarks.md for the measured results.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import itertools
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is bench/; the project root is what the imports need.
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/costplatform_bench"
SETTINGS_MODULE = "bench.settings"
INGEST_PATH = "/api/v1/records"
NAIVE_PATH = "/bench/naive/records"
NAIVE_BULK_PATH = "/bench/naive/records-bulk"

TARGET_RATE = 50_000
TARGET_VS_COPY = 1 / 3
TARGET_VS_NAIVE = 20
TARGET_BYTES = 300


# --------------------------------------------------------------------------------------------
# Realistic records
# --------------------------------------------------------------------------------------------

# name: (versions, speculative decoding, decode ms per token; 0 for an embedding model)
MODELS = {
    "meta-llama/Llama-3.1-70B-Instruct": (("2024-07-23", "2024-12-06"), True, 28.0),
    "meta-llama/Llama-3.1-8B-Instruct": (("2024-07-23",), False, 9.0),
    "Qwen/Qwen2.5-72B-Instruct": (("2024-09-19", "2025-01-10"), True, 30.0),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": ((None,), False, 14.0),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (("2025-01-20",), False, 18.0),
    "Qwen/Qwen2.5-Coder-32B-Instruct": (("2024-11-12",), False, 17.0),
    "BAAI/bge-m3": (("2024-01-30",), False, 0.0),
}
# The models a pipeline step may run on (one is picked for each feature's step).
STEP_MODELS = {
    "retrieve": ("BAAI/bge-m3",),
    "rerank": ("meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-Small-3.1-24B-Instruct-2503"),
    "plan": ("meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
    "tool-call": ("meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-Coder-32B-Instruct"),
    "generate": (
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        "Qwen/Qwen2.5-Coder-32B-Instruct",
    ),
    "judge": ("Qwen/Qwen2.5-72B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
}
# Pipelines of steps a feature runs, with how often each step is called per request.
PIPELINES = (
    (("generate", 1),),
    (("retrieve", 1), ("generate", 1)),
    (("retrieve", 1), ("rerank", 1), ("generate", 1)),
    (("plan", 1), ("tool-call", 2), ("generate", 1)),
    (("retrieve", 1), ("generate", 1), ("judge", 1)),
)
BUSINESS_LINES = ("support", "search", "sales", "marketing", "engineering", "legal", "finance", "people")
FEATURE_NAMES = ("summarize", "classify", "draft-reply", "extract", "answer", "translate", "rewrite", "route")
PROJECT_NAMES = ("atlas", "beacon", "comet", "delta", "ember")
ENVS = ("prod", "staging", "dev")
ENV_WEIGHTS = (90, 7, 3)
DIM_NAMES = ("business_line", "team", "project", "feature", "step", "env", "user", "conversation_id")
# Share of records with 1..8 dims (the first k of DIM_NAMES): mean 4.09.
DIM_COUNT_WEIGHTS = (8, 12, 20, 22, 16, 10, 7, 5)
USERS = 3_000
STATUS_WEIGHTS = (("ok", 940), ("error", 25), ("timeout", 15), ("aborted", 15), ("rejected", 5))
OK_FINISH = (("stop", 78), ("length", 7), ("tool_calls", 14), ("repetition", 1))
SPAN = timedelta(days=2)


def _cumulative(weights: Iterable[float]) -> list[float]:
    return list(itertools.accumulate(weights))


@dataclass
class DataStats:
    records: int = 0
    dims: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    retries: int = 0
    body_bytes: int = 0

    def mean_dims(self) -> float:
        return sum(k * n for k, n in self.dims.items()) / max(self.records, 1)

    def dims_mix(self) -> str:
        return ", ".join(f"{k}: {100 * n / max(self.records, 1):.0f}%" for k, n in sorted(self.dims.items()))

    def status_mix(self) -> str:
        return ", ".join(f"{name} {100 * n / max(self.records, 1):.1f}%" for name, n in self.statuses.most_common())


@dataclass(frozen=True)
class Call:
    """One (feature, step) of the catalogue: its dims and the model and endpoint it runs on."""

    dims: tuple[tuple[str, str], ...]  # business_line, team, project, feature, step
    model: str
    versions: tuple[str | None, ...]
    endpoint: str
    dim_count: int  # the feature's instrumentation sends the first dim_count of DIM_NAMES
    endpoint_known: bool  # older collectors leave the endpoint out


class RecordMaker:
    """Deterministic (given the seed and the time window) stream of valid token records v1,
    in roughly arrival order: ts rises through the window with a few seconds of jitter.

    A catalogue of 8 business lines, 3 teams each, 2-4 projects a team, 2-4 features a
    project; each feature runs a pipeline of steps, each step on a model of its own. Traffic
    per feature is Zipf-distributed. How many dims a record carries (1 to 8) is a property
    of the feature that sent it, drawn so that the records follow DIM_COUNT_WEIGHTS. Users
    (3,000, Zipf) and conversations (about six requests each) are the high-cardinality dims."""

    def __init__(self, seed: int, start: datetime, end: datetime, total: int) -> None:
        self.rng = rng = random.Random(seed)
        self.start, self.total = start, total
        self.step_s = (end - start).total_seconds() / max(total, 1)
        self.n = 0
        self.pending_retries: list[tuple[str, datetime, int, Call, dict[str, str]]] = []
        self.stats = DataStats()
        features = [
            (bl, f"{bl}-{team}", f"{bl}-{team}-{project}", feature)
            for bl in BUSINESS_LINES
            for team in ("core", "platform", "apps")
            for project in rng.sample(PROJECT_NAMES, rng.randint(2, 4))
            for feature in rng.sample(FEATURE_NAMES, rng.randint(2, 4))
        ]
        rng.shuffle(features)  # the order is the Zipf rank
        zipf = [1 / (rank + 1) ** 0.9 for rank in range(len(features))]
        # Dim counts by feature, so that the share of records with k dims follows the weights.
        want = [w / sum(DIM_COUNT_WEIGHTS) for w in _cumulative(DIM_COUNT_WEIGHTS)]
        dim_counts, share = {}, 0.0
        for rank in rng.sample(range(len(features)), len(features)):
            middle = share + zipf[rank] / sum(zipf) / 2
            dim_counts[rank] = 1 + next(i for i, c in enumerate(want) if c >= middle or i == len(want) - 1)
            share += zipf[rank] / sum(zipf)
        self.features: list[list[tuple[Call, int]]] = []  # per feature: its calls, with their weights
        for rank, (bl, team, project, feature) in enumerate(features):
            api = "responses" if rng.random() < 0.1 else "chat.completions"
            endpoint_known = rng.random() < 0.93
            steps = []
            for step, weight in rng.choice(PIPELINES):
                model = rng.choice(STEP_MODELS[step])
                endpoint = "embeddings" if MODELS[model][2] == 0.0 else api
                dims = (("business_line", bl), ("team", team), ("project", project), ("feature", feature),
                        ("step", step))  # fmt: skip
                call = Call(dims, model, MODELS[model][0], endpoint, dim_counts[rank], endpoint_known)
                steps.append((call, weight))
            self.features.append(steps)
        self.feature_cum = _cumulative(zipf)
        self.env_cum = _cumulative(ENV_WEIGHTS)
        self.status_cum = _cumulative(w for _, w in STATUS_WEIGHTS)
        self.finish_cum = _cumulative(w for _, w in OK_FINISH)
        self.users = [f"user-{rng.getrandbits(24):06x}" for _ in range(USERS)]
        self.user_cum = _cumulative(1 / (i + 1) ** 0.8 for i in range(USERS))
        self.conversations: list[str] = [self._conversation() for _ in range(500)]
        self.prompt_hashes = [f"{rng.getrandbits(128):032x}" for _ in range(40_000)]

    def _conversation(self) -> str:
        return f"conv_{self.rng.getrandbits(64):016x}"

    def _call(self) -> tuple[Call, dict[str, str]]:
        rng, choices = self.rng, self.rng.choices
        steps = choices(self.features, cum_weights=self.feature_cum)[0]
        call = steps[0][0] if len(steps) == 1 else choices([c for c, _ in steps], [w for _, w in steps])[0]
        k = call.dim_count
        dims = dict(call.dims[:k])
        if k >= 6:
            dims["env"] = choices(ENVS, cum_weights=self.env_cum)[0]
        if k >= 7:
            dims["user"] = choices(self.users, cum_weights=self.user_cum)[0]
        if k >= 8:
            # About six requests a conversation: a new one replaces a random live one now and then.
            if rng.random() < 0.17:
                self.conversations[rng.randrange(len(self.conversations))] = self._conversation()
            dims["conversation_id"] = rng.choice(self.conversations)
        return call, dims

    def record(self) -> dict[str, Any]:
        rng = self.rng
        rand, randint, lognorm = rng.random, rng.randint, rng.lognormvariate
        self.n += 1
        ts = self.start + timedelta(seconds=self.n * self.step_s + rand() * 8 - 4)
        stats = self.stats
        stats.records += 1

        retry = self.pending_retries.pop(0) if self.pending_retries and rand() < 0.5 else None
        if retry is not None:
            retry_of, first_ts, attempt, call, dims = retry
            ts = max(ts, first_ts + timedelta(seconds=1))
            stats.retries += 1
        else:
            call, dims = self._call()
            attempt, retry_of = 1, None
        stats.dims[len(dims)] += 1
        versions, speculative, ms_per_token = MODELS[call.model]
        # A second version, where there is one, is a canary taking a third of the traffic.
        version = versions[0] if len(versions) == 1 else versions[rand() < 0.35]

        endpoint = call.endpoint
        embeddings = endpoint == "embeddings"
        prefix = {"chat.completions": "chatcmpl-", "responses": "resp_", "embeddings": "embd-"}[endpoint]
        record_id = f"{prefix}{rng.getrandbits(128):032x}"

        status = rng.choices(STATUS_WEIGHTS, cum_weights=self.status_cum)[0][0]
        stats.statuses[status] += 1
        prompt = min(128_000, max(4, int(lognorm(7.0, 1.0))))  # median ~1,100 tokens
        cached = 0
        if status != "rejected" and rand() < 0.6:
            cached = int(prompt * (0.2 + 0.75 * rand())) // 16 * 16
        system = min(prompt // 2, randint(40, 900)) if not embeddings and rand() < 0.9 else 0
        tool = int((prompt - system) * (0.1 + 0.6 * rand())) if not embeddings and rand() < 0.3 else 0
        finish: str | None = None
        if embeddings or status == "rejected":
            completion = 0
        elif status == "ok":
            finish = rng.choices(OK_FINISH, cum_weights=self.finish_cum)[0][0]
            completion = 1024 if finish == "length" else min(8192, max(1, int(lognorm(5.5, 0.9))))
        else:
            completion = int(lognorm(4.0, 1.2)) if rand() < 0.7 else 0
            finish = {"error": "error", "aborted": "abort", "timeout": "abort" if rand() < 0.5 else None}[status]
        tokens: dict[str, int] = {"prompt": prompt, "completion": completion, "prompt_cached": cached}
        if system:
            tokens["system"] = system
        if tool:
            tokens["tool"] = tool
        if completion and rand() < 0.25:
            tokens["structural"] = int(completion * (0.02 + 0.18 * rand()))
        if rand() < 0.05:
            tokens["padding"] = randint(1, 63)
        if speculative and completion:
            draft = int(completion * (1.5 + 1.5 * rand()))
            tokens["draft"] = draft
            tokens["draft_accepted"] = int(draft * (0.4 + 0.4 * rand()))
        if status == "ok" and rand() < 0.01:
            tokens["recomputed"] = randint(1, prompt)

        rec: dict[str, Any] = {
            "record_id": record_id,
            "ts": ts,
            "model": call.model,
            "tokens": tokens,
            "outcome": {"status": status} if finish is None else {"status": status, "finish_reason": finish},
        }
        if version is not None:
            rec["model_version"] = version
        if call.endpoint_known:
            rec["endpoint"] = endpoint
        rec["dims"] = dims
        if rand() < 0.92:
            queued = int(lognorm(2.5, 1.3))
            if status == "rejected":
                rec["timing"] = {"queued": queued, "e2e": queued}
            else:
                prefill = max(1, (prompt - cached) // 9)
                decode = int(completion * ms_per_token * (0.8 + 0.4 * rand()))
                ttft = queued + prefill
                rec["timing"] = {"queued": queued, "ttft": ttft, "prefill": prefill, "decode": decode,
                                 "e2e": ttft + decode}  # fmt: skip
        if attempt > 1:
            rec["attempt"] = attempt
            rec["retry_of"] = retry_of
        if not embeddings and rand() < 0.85:
            rec["prompt_hash"] = self.prompt_hashes[int(len(self.prompt_hashes) * rand() ** 2)]
        if rand() < 0.3:
            rec["quality_tier"] = ("high", "mid", "low")[randint(0, 2)]

        if status in ("error", "timeout") and attempt < 4 and rand() < 0.6:
            self.pending_retries.append((record_id, ts, attempt + 1, call, dims))
        return rec


def time_window(now: datetime) -> tuple[datetime, datetime]:
    """~2 days ending a minute ago, inside the current month when the month is old enough."""
    end = now - timedelta(minutes=1)
    month = end.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start = end - SPAN
    if start < month and end - month >= timedelta(hours=12):
        start = month
    return start, end


def generate_bodies(total: int, batch_size: int, seed: int, now: datetime) -> tuple[list[bytes], list[int], DataStats]:
    """Request bodies {"records": [...]} of batch_size records each (the last may be shorter)."""
    import msgspec

    start, end = time_window(now)
    maker = RecordMaker(seed, start, end, total)
    encode = msgspec.json.Encoder().encode
    bodies, counts = [], []
    made = 0
    while made < total:
        n = min(batch_size, total - made)
        body = encode({"records": [maker.record() for _ in range(n)]})
        bodies.append(body)
        counts.append(n)
        maker.stats.body_bytes += len(body)
        made += n
    return bodies, counts, maker.stats


def sample_bodies(bodies: list[bytes], records: int, batch_size: int) -> tuple[list[bytes], list[int]]:
    """The first `records` records of the run, re-cut into bodies of batch_size."""
    import msgspec

    items: list[Any] = []
    for body in bodies:
        if len(items) >= records:
            break
        items.extend(msgspec.json.decode(body)["records"][: records - len(items)])
    cut = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
    return [msgspec.json.encode({"records": part}) for part in cut], [len(part) for part in cut]


def wait_quiet(limit: float, idle_cores: float = 0.3) -> None:
    """Wait (up to `limit` seconds) until the machine uses less than `idle_cores` of CPU over a
    second, so a timed phase does not start while something else is busy."""
    deadline = time.monotonic() + limit
    while True:
        before, procs = _machine_cpu()[0], _processes()
        time.sleep(1.0)
        busy = _machine_cpu()[0] - before
        if busy < idle_cores:
            return
        now = _processes()
        used = {p.name: p.cpu - procs[pid].cpu for pid, p in now.items() if pid in procs and p.name == procs[pid].name}
        top = ", ".join(f"{name} {cpu:.1f}" for name, cpu in sorted(used.items(), key=lambda x: -x[1])[:2] if cpu)
        if time.monotonic() >= deadline:
            print(f"  (the machine is still busy, {busy:.1f} cores in use: {top}; going ahead)", flush=True)
            return
        print(f"  (waiting for the machine to be idle: {busy:.1f} cores in use: {top})", flush=True)


# --------------------------------------------------------------------------------------------
# Database and server
# --------------------------------------------------------------------------------------------


def db_recreate(url: str, *, this_code: bool = True) -> dict[str, Any]:
    import psycopg
    from psycopg import sql

    from costplatform.env import database_from_url
    from devtools import templatedb

    db = database_from_url(url)
    name = str(db["NAME"])
    if "bench" not in name:
        sys.exit(f"refusing to drop and recreate database {name!r}: its name must contain 'bench'")
    params: dict[str, Any] = {"host": db["HOST"], "port": db["PORT"] or None, "user": db["USER"] or None}
    params |= {"password": db["PASSWORD"] or None, **db["OPTIONS"]}  # type: ignore[dict-item]
    params = {key: value for key, value in params.items() if value}
    # The tests' short forms: a copy of this checkout's migrated database (their migrate: nothing to
    # do). Another commit's code migrates its own from nothing.
    if this_code and templatedb.wanted():
        templatedb.database_copy(url)
    else:
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return {**params, "dbname": name}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def code_env(root: Path, url: str) -> dict[str, str]:
    """The environment that runs the project's code from `root` (this checkout or a worktree
    of another commit) against the database at `url`: `root` first on the path, ahead of the
    virtual environment's editable install of this checkout."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))
    return env


def server_start(args: argparse.Namespace, url: str, port: int, root: Path = REPO) -> subprocess.Popen:
    cmd = [
        str(Path(sys.executable).parent / "gunicorn"),
        "costplatform.wsgi:application",
        "--bind", f"127.0.0.1:{port}",
        "--workers", str(args.workers),
        "--worker-class", args.worker_class,
        "--threads", str(args.threads),
        "--timeout", "600",
        "--log-level", "warning",
        "--chdir", str(root),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=code_env(root, url), cwd=root)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"gunicorn exited with status {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.terminate()
    sys.exit("gunicorn did not answer /healthz within 120 s")


def server_stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def post_all(port: int, path: str, secret: str, bodies: list[bytes], counts: list[int], clients: int) -> float:
    """POST every body from `clients` threads over keep-alive connections; every response must
    be 200 with all its records accepted. Returns the wall time in seconds."""
    jobs = iter(list(zip(bodies, counts, strict=True)))
    lock = threading.Lock()
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        while not failures:
            with lock:
                job = next(jobs, None)
            if job is None:
                break
            body, count = job
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            if response.status != 200:
                failures.append(f"HTTP {response.status}: {payload[:500]!r}")
                break
            result = json.loads(payload)
            if result.get("accepted") != count:
                failures.append(f"accepted {result.get('accepted')} of {count}: {payload[:500]!r}")
                break
        conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if failures:
        sys.exit(f"{path}: {failures[0]}")
    return elapsed


# --------------------------------------------------------------------------------------------
# (b) at another commit (--compare-ref)
# --------------------------------------------------------------------------------------------

# Run in the worktree, with its code first on the path: migrate its database, make the key.
_REF_SETUP = """
import json
import django
from django.core.management import call_command
django.setup()
call_command("migrate", verbosity=0)
import apps
from apps.accounts.services import collector_key_create
print(json.dumps({"secret": collector_key_create(name="bench").secret, "apps": list(apps.__path__)}))
"""


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def checkout_describe() -> dict[str, Any]:
    """The commit of this checkout and the tracked files changed in its working tree."""
    changed = git("diff", "--name-only", "HEAD").splitlines()
    return {"sha": git("rev-parse", "HEAD"), "short": git("rev-parse", "--short", "HEAD"), "changed": changed}


@dataclass
class RefCode:
    """Another commit's code, checked out in a worktree, with its own migrated database."""

    ref: str
    sha: str
    short: str
    tmp: Path
    root: Path
    url: str
    conninfo: dict[str, Any]
    secret: str = ""


def ref_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_ref"))


def ref_prepare(ref: str, url: str) -> RefCode:
    sha = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    short = git("rev-parse", "--short", sha)
    tmp = Path(tempfile.mkdtemp(prefix=f"costplatform-bench-{short}-"))
    root = tmp / "tree"
    git("worktree", "add", "--detach", str(root), sha)
    code = RefCode(ref, sha, short, tmp, root, ref_url(url), {})
    try:
        code.conninfo = db_recreate(code.url, this_code=False)
        if not (root / "bench" / "settings.py").exists():
            sys.exit(f"{ref} ({short}) has no bench/settings.py: it predates the benchmark")
        done = subprocess.run([sys.executable, "-c", _REF_SETUP], cwd=root, env=code_env(root, code.url),
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"setting up {ref} ({short}) failed:\n{done.stderr[-3000:]}")
        setup = json.loads(done.stdout.strip().splitlines()[-1])
        if [Path(p).resolve() for p in setup["apps"]] != [(root / "apps").resolve()]:
            sys.exit(f"the code of {ref} was not the one imported: apps from {setup['apps']}")
        code.secret = setup["secret"]
    except BaseException:
        ref_remove(code)
        raise
    return code


def ref_remove(code: RefCode) -> None:
    """Remove the worktree (the database stays, as the main one does, for a look afterwards)."""
    subprocess.run(["git", "worktree", "remove", "--force", str(code.root)], cwd=REPO, capture_output=True)
    shutil.rmtree(code.tmp, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)


def ref_counts(conninfo: dict[str, Any]) -> tuple[dict[str, int], int]:
    """record_storage() and rollup_records() of another database."""
    import psycopg

    with psycopg.connect(**conninfo) as conn:
        total, heap, indexes = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0), "
            "coalesce(sum(pg_relation_size(i.inhrelid)), 0), coalesce(sum(pg_indexes_size(i.inhrelid)), 0) "
            "FROM pg_inherits i WHERE i.inhparent = 'ingest_record'::regclass"
        ).fetchone()
        rows = conn.execute("SELECT count(*) FROM ingest_record").fetchone()[0]
        rollup = conn.execute("SELECT coalesce(sum(records), 0) FROM ingest_hourlyusage").fetchone()[0]
    storage = {"rows": rows, "bytes": int(total), "heap_bytes": int(heap), "index_bytes": int(indexes)}
    return storage, int(rollup)


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int | str) -> list[bytes]:
    """Fields of /proc/PID/stat from the third (state) on; empty when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return data[data.rindex(b")") + 2 :].split()


def _machine_cpu() -> tuple[float, float]:
    """(busy, steal) core-seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq) / _CLK_TCK, steal / _CLK_TCK


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    name: str  # the command line, cut short
    cpu: float  # user + system seconds
    sys: float  # system seconds
    started: int  # clock ticks after boot: with the pid, tells a process from a later one with the same pid


def _processes() -> dict[int, _Proc]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                name = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:70]
        except OSError:
            continue
        if fields:
            cpu = (int(fields[11]) + int(fields[12])) / _CLK_TCK
            found[int(entry)] = _Proc(
                int(entry), int(fields[1]), name or f"[{entry}]", cpu, int(fields[12]) / _CLK_TCK, int(fields[19])
            )
    return found


class CpuMeter:
    """Where the CPU went during a phase, from /proc: the server (gunicorn and its workers),
    the PostgreSQL backends serving the bench database, this process (the client), and the
    rest of the machine ("other": PostgreSQL's background processes, the kernel, and whatever
    else runs on the machine at the time; the biggest of those are kept in top_others).

    Processes are sampled every `interval` seconds during the phase, so one that exits before
    the end still counts up to its last sample: Django closes a connection older than
    CONN_MAX_AGE (60 s) after a request, so a worker's backend may be replaced mid-phase."""

    def __init__(self, *, server_pid: int | None, dbname: str, interval: float = 0.5) -> None:
        self.server_pid, self.dbname, self.interval = server_pid, dbname, interval
        self._stop = threading.Event()

    def _sample(self) -> None:
        for proc in _processes().values():
            ident = (proc.pid, proc.started)
            seen = self.last.get(ident)
            if seen is not None and proc.name.startswith("[") and not seen.name.startswith("["):
                proc = replace(proc, name=seen.name)  # an exiting process has no command line left
            self.last[ident] = proc

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> CpuMeter:
        self.start_procs = {(p.pid, p.started): p for p in _processes().values()}
        self.last: dict[tuple[int, int], _Proc] = dict(self.start_procs)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.start_machine = _machine_cpu()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.started
        machine, steal = _machine_cpu()
        self._stop.set()
        self._thread.join()
        self._sample()
        self.machine = machine - self.start_machine[0]
        self.steal = steal - self.start_machine[1]
        self.end_procs = self.last

    def _group(self, proc: _Proc, backends: set[int]) -> str:
        if proc.pid == os.getpid():
            return "client"
        if self.server_pid is not None and self.server_pid in (proc.pid, proc.ppid):
            return "workers"
        if proc.pid in backends:
            return "backends"
        return "other"

    def _backends(self) -> set[int]:
        """The PostgreSQL backends serving the bench database, and the parallel workers they led."""
        ours = f" {self.dbname} "
        found = {p.pid for p in self.end_procs.values() if p.name.startswith("postgres:") and ours in p.name}
        for p in self.end_procs.values():
            if p.name.startswith("postgres:") and "parallel worker for PID " in p.name:
                leader = p.name.rsplit("PID ", 1)[1].split()[0]
                if leader.isdigit() and int(leader) in found:
                    found.add(p.pid)
        return found

    def summary(self, records: int) -> dict[str, Any]:
        used: defaultdict[str, float] = defaultdict(float)
        others: Counter[str] = Counter()
        backends = self._backends()
        for ident, proc in self.end_procs.items():
            before = self.start_procs.get(ident)
            delta = proc.cpu - (before.cpu if before is not None else 0.0)
            group = self._group(proc, backends)
            used[group] += delta
            used[f"{group}_sys"] += proc.sys - (before.sys if before is not None else 0.0)
            if group == "other" and delta > 0:
                others[proc.name] += round(delta * _CLK_TCK)
        measured = used["workers"] + used["backends"] + used["client"]
        return {
            "wall": self.wall,
            "machine": self.machine,
            "steal": self.steal,
            "workers": used["workers"],
            "backends": used["backends"],
            "client": used["client"],
            "workers_sys": used["workers_sys"],
            "backends_sys": used["backends_sys"],
            "other": self.machine - measured,
            "cpus": os.cpu_count() or 1,
            "records": records,
            "top_others": [(name, ticks / _CLK_TCK) for name, ticks in others.most_common(6)],
        }


def record_storage() -> dict[str, int]:
    """Rows and bytes of the ingest_record partitions (heap + indexes + TOAST + maps)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0), "
            "coalesce(sum(pg_relation_size(i.inhrelid)), 0), coalesce(sum(pg_indexes_size(i.inhrelid)), 0) "
            "FROM pg_inherits i WHERE i.inhparent = 'ingest_record'::regclass"
        )
        total, heap, indexes = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM ingest_record")
        rows = cursor.fetchone()[0]
    return {"rows": rows, "bytes": int(total), "heap_bytes": int(heap), "index_bytes": int(indexes)}


def table_storage(table: str) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_total_relation_size('{table}'), (SELECT count(*) FROM {table})")
        total, rows = cursor.fetchone()
    return {"rows": rows, "bytes": int(total)}


def rollup_records() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(records), 0) FROM ingest_hourlyusage")
        return int(cursor.fetchone()[0])


def build_rows(source_id: int, bodies: list[bytes]) -> list[tuple]:
    """The tuples records_store writes for these bodies, built by the service's own code."""
    from django.conf import settings

    from apps.ingest import services
    from apps.ingest.contract import decode_batch

    rows: list[tuple] = []
    for body in bodies:
        batch = decode_batch(
            body,
            ndjson=False,
            max_records=settings.INGEST_MAX_RECORDS,
            max_age=timedelta(days=settings.INGEST_MAX_AGE_DAYS),
        )
        assert not batch.rejected and not batch.duplicates, batch.rejected[:1]
        # The staging tuples end with the rollup dims id, which ingest_record has not.
        rows.extend(row[:-1] for row in services.records_rows(source_id=source_id, records=batch.records).rows)
    return rows


def raw_copy(conninfo: dict[str, Any], rows: list[tuple]) -> CpuMeter:
    """One COPY ... FROM STDIN (FORMAT BINARY) of all rows into ingest_record, committed."""
    import psycopg

    from apps.ingest.services import RECORD_COLUMNS

    names = ", ".join(name for name, _ in RECORD_COLUMNS)
    types = [kind for _, kind in RECORD_COLUMNS]
    statement = f"COPY ingest_record ({names}) FROM STDIN (FORMAT BINARY)"
    with psycopg.connect(**conninfo) as conn:
        with CpuMeter(server_pid=None, dbname=conninfo["dbname"]) as meter:
            with conn.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types(types)
                write = copy.write_row
                for row in rows:
                    write(row)
            conn.commit()
    return meter


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/ingest.py",
        description=(
            "Ingest benchmark. Generates --records realistic token records (1 to 8 dims, mixed statuses), "
            "then measures records/s of (b) the real ingest API over HTTP (gunicorn in other processes), "
            "(c) raw binary COPY of the same rows into ingest_record, and (a) a DRF ModelSerializer + ORM "
            "path on the first --naive-records of them, saved row by row and again with bulk_create; and bytes "
            "per stored record. Prints a table and "
            "the target checks, and writes the results as JSON. DROPS and recreates the database named "
            "in DATABASE_URL (default costplatform_bench; the name must contain 'bench')."
        ),
    )
    add = parser.add_argument
    add("--records", type=int, default=1_000_000, help="records generated and stored by (b) and (c) (1000000)")
    add("--naive-records", type=int, default=20_000,
        help="records sent through (a), row by row and with bulk_create: the first ones of the same set; "
             "0 skips (a) (20000)")  # fmt: skip
    add("--batch-size", type=int, default=5_000, help="records per HTTP request of (b) (5000)")
    add("--naive-batch-size", type=int, default=1_000,
        help="records per HTTP request of (a), smaller so its few requests keep every worker busy (1000)")  # fmt: skip
    add("--workers", type=int, default=3, help="gunicorn worker processes (3)")
    add("--worker-class", choices=("sync", "gthread"), default="sync", help="gunicorn worker class (sync)")
    add("--threads", type=int, default=1, help="threads per gunicorn worker, for gthread (1)")
    add("--clients", type=int, default=0, help="concurrent client connections (0: workers x threads)")
    add("--seed", type=int, default=1, help="random seed of the generated records (1)")
    add("--quiet-wait", type=float, default=120.0,
        help="before each timed phase, wait up to this many seconds for the machine to be idle (120)")  # fmt: skip
    add("--json", type=Path, default=None, help="write the results here (bench/results/ingest-<UTC time>.json)")
    add("--check", action="store_true", help="exit with status 1 when a target is missed")
    add("--compare-ref", metavar="REF", default=None,
        help="also run (b) against the code of this commit (e.g. f06360e), right after (b): a git worktree of it "
             "serves from its own gunicorn into its own database (DATABASE_URL's name + '_ref'); "
             "both rates are reported side by side")  # fmt: skip
    args = parser.parse_args(argv)
    if min(args.records, args.batch_size, args.naive_batch_size, args.workers, args.threads) < 1:
        parser.error("--records, --batch-size, --naive-batch-size, --workers and --threads must be positive")
    if args.naive_records < 0 or args.clients < 0:
        parser.error("--naive-records and --clients must not be negative")
    args.naive_records = min(args.naive_records, args.records)
    args.clients = args.clients or args.workers * args.threads
    return args


def _rate(records: int, seconds: float) -> float:
    return records / seconds if seconds > 0 else float("inf")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    print(f"ingest benchmark: {args.records:,} records, batches of {args.batch_size:,}, "
          f"{os.cpu_count()} CPUs", flush=True)  # fmt: skip

    here = checkout_describe()
    ref = ref_prepare(args.compare_ref, url) if args.compare_ref else None
    if ref is not None:
        print(f"--compare-ref {args.compare_ref}: {ref.short} checked out in {ref.root}, "
              f"database {ref.conninfo['dbname']} recreated and migrated with its code", flush=True)  # fmt: skip
    conninfo = db_recreate(url)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection

    from apps.accounts.services import collector_key_create
    from bench.naive.models import NaiveRecord

    with connection.schema_editor() as editor:
        editor.create_model(NaiveRecord)  # the comparison path's table; bench.naive has no migrations

    collector = collector_key_create(name="bench")
    print(f"database {conninfo['dbname']} recreated and migrated", flush=True)

    gc.disable()  # millions of small objects: the cyclic collector only costs time here
    t0 = time.perf_counter()
    bodies, counts, stats = generate_bodies(args.records, args.batch_size, args.seed, datetime.now(UTC))
    print(f"generated {stats.records:,} records in {time.perf_counter() - t0:.1f} s: "
          f"{stats.body_bytes / stats.records:.0f} JSON bytes a record, {stats.mean_dims():.2f} dims a record "
          f"on average ({stats.dims_mix()}), {stats.retries:,} retries; {stats.status_mix()}", flush=True)  # fmt: skip

    port = free_port()
    server = server_start(args, url, port)
    print(f"gunicorn: {args.workers} {args.worker_class} workers x {args.threads} threads on 127.0.0.1:{port}, "
          f"{args.clients} client connections", flush=True)  # fmt: skip
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "cpus": os.cpu_count()}
    results["code"] = here
    ref_server = None
    try:
        # Warm-up: every worker opens its database connection and imports its views (no rows).
        empty = b'{"records": []}'
        post_all(port, INGEST_PATH, collector.secret, [empty] * args.clients * 4, [0] * args.clients * 4, args.clients)
        if ref is not None:
            ref_port = free_port()
            ref_server = server_start(args, ref.url, ref_port, ref.root)
            post_all(ref_port, INGEST_PATH, ref.secret, [empty] * args.clients * 4, [0] * args.clients * 4,
                     args.clients)  # fmt: skip

        # (b) the real ingest API.
        wait_quiet(args.quiet_wait)
        print("(b) ingest API ...", flush=True)
        with CpuMeter(server_pid=server.pid, dbname=conninfo["dbname"]) as b_cpu:
            b_seconds = post_all(port, INGEST_PATH, collector.secret, bodies, counts, args.clients)
        connection.close()
        b_storage = record_storage()
        b_rollup = rollup_records()
        if b_storage["rows"] != args.records or b_rollup != args.records:
            sys.exit(f"(b) stored {b_storage['rows']:,} records, rollups count {b_rollup:,}; expected {args.records:,}")
        results["b"] = {"records": args.records, "seconds": b_seconds, "storage": b_storage,
                        "cpu": b_cpu.summary(args.records), "rollup_rows": table_storage("ingest_hourlyusage"),
                        "dimsets": table_storage("ingest_dimset")}  # fmt: skip

        # (b) again, the same bodies, against the code of --compare-ref.
        if ref is not None and ref_server is not None:
            wait_quiet(args.quiet_wait)
            print(f"(b) ingest API at {ref.short} ...", flush=True)
            with CpuMeter(server_pid=ref_server.pid, dbname=ref.conninfo["dbname"]) as r_cpu:
                r_seconds = post_all(ref_port, INGEST_PATH, ref.secret, bodies, counts, args.clients)
            server_stop(ref_server)
            ref_server = None
            r_storage, r_rollup = ref_counts(ref.conninfo)
            if r_storage["rows"] != args.records or r_rollup != args.records:
                sys.exit(f"(b) at {ref.short} stored {r_storage['rows']:,} records, rollups count {r_rollup:,}; "
                         f"expected {args.records:,}")  # fmt: skip
            results["b_ref"] = {"records": args.records, "seconds": r_seconds, "storage": r_storage,
                                "cpu": r_cpu.summary(args.records), "ref": args.compare_ref, "sha": ref.sha,
                                "short": ref.short}  # fmt: skip

        # (c) raw COPY of the same rows, into the same (emptied) table.
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE ingest_record, ingest_hourlyusage")
        print("(c) building rows ...", flush=True)
        t0 = time.perf_counter()
        rows = build_rows(collector.key.pk, bodies)
        build_seconds = time.perf_counter() - t0
        wait_quiet(args.quiet_wait)
        print("(c) raw COPY ...", flush=True)
        c_cpu = raw_copy(conninfo, rows)
        del rows
        c_storage = record_storage()
        if c_storage["rows"] != args.records:
            sys.exit(f"(c) stored {c_storage['rows']:,} records; expected {args.records:,}")
        results["c"] = {"records": args.records, "seconds": c_cpu.wall, "storage": c_storage,
                        "cpu": c_cpu.summary(args.records), "row_build_seconds": build_seconds}  # fmt: skip

        # (a) the straightforward path, on the first records of the same set; (a bulk) the same
        # sample, the same validation, one bulk_create a request. Each starts from an empty table.
        if args.naive_records:
            a_bodies, a_counts = sample_bodies(bodies, args.naive_records, args.naive_batch_size)
            n = f"{args.naive_records:,}"
            naive = (
                ("a", NAIVE_PATH, f"ModelSerializer + ORM on the first {n} records"),
                ("a_bulk", NAIVE_BULK_PATH, f"ModelSerializer + bulk_create on the same {n} records"),
            )
            for key, path, what in naive:
                label = f"({key.replace('_', ' ')})"
                with connection.cursor() as cursor:
                    cursor.execute("TRUNCATE bench_naive_naiverecord")
                wait_quiet(args.quiet_wait)
                print(f"{label} {what} ...", flush=True)
                with CpuMeter(server_pid=server.pid, dbname=conninfo["dbname"]) as n_cpu:
                    n_seconds = post_all(port, path, collector.secret, a_bodies, a_counts, args.clients)
                n_storage = table_storage("bench_naive_naiverecord")
                if n_storage["rows"] != args.naive_records:
                    sys.exit(f"{label} stored {n_storage['rows']:,} records; expected {args.naive_records:,}")
                results[key] = {"records": args.naive_records, "seconds": n_seconds, "storage": n_storage,
                                "cpu": n_cpu.summary(args.naive_records)}  # fmt: skip
    finally:
        server_stop(server)
        if ref_server is not None:
            server_stop(ref_server)
        if ref is not None:
            ref_remove(ref)

    results["data"] = {"mean_dims": stats.mean_dims(), "dims": dict(sorted(stats.dims.items())),
                       "statuses": dict(stats.statuses), "retries": stats.retries,
                       "json_bytes_per_record": stats.body_bytes / stats.records}  # fmt: skip
    return report(args, results)


def _cpu_us(cpu: dict[str, Any]) -> tuple[dict[str, float], float, float]:
    """Core-microseconds a record per group, how busy the machine was, and the rate 'if alone'."""
    us = {k: cpu[k] / cpu["records"] * 1e6 for k in ("workers", "backends", "client", "other", "machine", "steal")}
    busy = cpu["machine"] / (cpu["wall"] * cpu["cpus"])
    own = us["workers"] + us["backends"] + us["client"]
    alone = cpu["cpus"] * 1e6 / own if own else float("inf")
    cpu["alone_records_per_s"] = alone
    return us, busy, alone


def report(args: argparse.Namespace, results: dict[str, Any]) -> int:
    b_rate = _rate(results["b"]["records"], results["b"]["seconds"])
    c_rate = _rate(results["c"]["records"], results["c"]["seconds"])
    lines = []
    label = {
        "a": "(a) DRF ModelSerializer + ORM, HTTP",
        "a_bulk": "(a) the same, bulk_create, HTTP",
        "b": f"(b) ingest API, HTTP, batches of {args.batch_size:,}",
        "c": "(c) raw binary COPY, one process",
    }
    header = f"| {'path':<40} | {'records':>9} | {'seconds':>7} | {'records/s':>9} | {'vs (b)':>7} |"
    lines += [header, "|" + "|".join("-" * (len(cell) + 0) for cell in header.split("|")[1:-1]) + "|"]
    for key in ("a", "a_bulk", "b", "c"):
        if key not in results:
            continue
        r = results[key]
        rate = _rate(r["records"], r["seconds"])
        r["records_per_s"] = rate
        lines.append(
            f"| {label[key]:<40} | {r['records']:>9,} | {r['seconds']:>7.1f} | {rate:>9,.0f} | {rate / b_rate:>6.3f}x |"
        )
    print()
    print("\n".join(lines))
    if "a" in results:
        sample = results["a"]["records"]
        print(f"\n(a) ran on the first {sample:,} of the {args.records:,} records (it is slow); its rate is compared. "
              "(a) bulk_create: the same records and validation, one multi-row INSERT a request.")  # fmt: skip

    b_store, c_store = results["b"]["storage"], results["c"]["storage"]
    b_bytes = b_store["bytes"] / b_store["rows"]
    c_bytes = c_store["bytes"] / c_store["rows"]
    data = results["data"]
    print(f"\nbytes per stored record (ingest_record partitions, heap + indexes + TOAST, {b_store['rows']:,} rows, "
          f"{data['mean_dims']:.2f} dims a record on average):")  # fmt: skip
    print(f"  after (b): {b_bytes:.0f} (heap {b_store['heap_bytes'] / b_store['rows']:.0f}, "
          f"indexes {b_store['index_bytes'] / b_store['rows']:.0f})")  # fmt: skip
    print(f"  after (c): {c_bytes:.0f} (heap {c_store['heap_bytes'] / c_store['rows']:.0f}, "
          f"indexes {c_store['index_bytes'] / c_store['rows']:.0f})")  # fmt: skip
    if "a" in results:
        a_store = results["a"]["storage"]
        print(f"  (a) table, for comparison: {a_store['bytes'] / a_store['rows']:.0f}")
    print(f"(c) building the rows from the bodies took {results['c']['row_build_seconds']:.1f} s, not timed in (c).")
    b = results["b"]
    print(f"(b) left {b['rollup_rows']['rows']:,} hourly rollup rows and {b['dimsets']['rows']:,} dim sets "
          f"({b['dimsets']['bytes'] / max(b['storage']['rows'], 1):.0f} bytes a record).")  # fmt: skip

    print(f"\nCPU, core-microseconds a record (the machine has {os.cpu_count()} cores; 'other' is the rest of the "
          "machine: PostgreSQL's background processes, the kernel and anything else running; 'steal' is time the "
          "hypervisor gave to other machines; 'if alone' is cores / (workers + backends + client), the rate "
          "this path would reach with the cores to itself):")  # fmt: skip
    header = (f"| {'path':<10} | {'server workers':>14} | {'postgres backends':>17} | {'client':>6} | {'other':>5} | "
              f"{'machine busy':>13} | {'steal':>5} | {'if alone':>10} |")  # fmt: skip
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    names = {"a": "(a)", "a_bulk": "(a) bulk", "b": "(b)", "c": "(c)", "b_ref": "(b) at ref"}
    for key in ("a", "a_bulk", "b", "b_ref", "c"):
        if key not in results:
            continue
        us, busy, alone = _cpu_us(results[key]["cpu"])
        print(f"| {names[key]:<10} | {us['workers']:>14.1f} | {us['backends']:>17.1f} | {us['client']:>6.1f} | "
              f"{us['other']:>5.1f} | {us['machine']:>6.1f} ({busy:>4.0%}) | {us['steal']:>5.1f} | "
              f"{alone:>8,.0f}/s |")  # fmt: skip
    for key in ("a", "a_bulk", "b", "b_ref", "c"):
        cpu = results.get(key, {}).get("cpu")
        if cpu and cpu["other"] > 0.1 * cpu["machine"]:
            top = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu["top_others"][:4])
            print(f"  {names[key]} 'other' was {cpu['other']:.1f} core-s of {cpu['machine']:.1f}; most: {top}")
    if "b_ref" in results:
        report_side_by_side(args, results)

    checks = [(f"(b) >= {TARGET_RATE:,} records/s", f"{b_rate:,.0f}", b_rate >= TARGET_RATE)]
    checks.append(("(b) >= 1/3 of (c)", f"{b_rate / c_rate:.2f}", b_rate >= TARGET_VS_COPY * c_rate))
    if "a" in results:
        a_rate = results["a"]["records_per_s"]
        checks.append((f"(b)/(a) >= {TARGET_VS_NAIVE}", f"{b_rate / a_rate:.1f}", b_rate >= TARGET_VS_NAIVE * a_rate))
    if "a_bulk" in results:  # reported beside (a), not a target
        print(f"\n(b)/(a) bulk_create: {b_rate / results['a_bulk']['records_per_s']:.1f}")
    checks.append((f"<= {TARGET_BYTES} bytes per record", f"{b_bytes:.0f}", b_bytes <= TARGET_BYTES))
    print("\ntargets:")
    for name, value, ok in checks:
        print(f"  {name:<28} {value:>10}  {'pass' if ok else 'FAIL'}")
    results["checks"] = [{"target": n, "value": v, "pass": ok} for n, v, ok in checks]
    results["bytes_per_record"] = b_bytes

    path = args.json or REPO / "bench" / "results" / f"ingest-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nresults written to {path}")
    return 1 if args.check and not all(ok for _, _, ok in checks) else 0


def report_side_by_side(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """(b) at this checkout and at --compare-ref, from the same run, on the same bodies."""
    here, ref = results["code"], results["b_ref"]
    dirty = f" + changes to {len(here['changed'])} files" if here["changed"] else ""
    rows = [
        (f"{here['short']} (this checkout{dirty})", results["b"]),
        (f"{ref['short']} (--compare-ref {ref['ref']})", ref),
    ]
    print(f"\n(b) ingest API side by side, the same {args.records:,} records in batches of {args.batch_size:,}, "
          "one run (CPU in core-us a record):")  # fmt: skip
    header = (f"| {'code':<44} | {'seconds':>7} | {'records/s':>9} | {'workers':>7} | {'backends':>8} | "
              f"{'other':>5} | {'if alone':>10} |")  # fmt: skip
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    rates = []
    for name, r in rows:
        rate = _rate(r["records"], r["seconds"])
        r["records_per_s"] = rate
        us, _busy, alone = _cpu_us(r["cpu"])
        rates.append((rate, alone))
        print(f"| {name:<44} | {r['seconds']:>7.1f} | {rate:>9,.0f} | {us['workers']:>7.1f} | {us['backends']:>8.1f} | "
              f"{us['other']:>5.1f} | {alone:>8,.0f}/s |")  # fmt: skip
    (now, now_alone), (then, then_alone) = rates
    print(f"this checkout / {ref['short']}: {now / then:.2f} (records/s), {now_alone / then_alone:.2f} (if alone)")
    if here["changed"]:
        print(f"  (uncommitted changes in this checkout: {', '.join(here['changed'])})")


if __name__ == "__main__":
    sys.exit(main())
