"""Real servers the end-to-end tests start as processes: the platform (gunicorn on a
PostgreSQL database of its own) and the instrumented vLLM server."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

from devtools import templatedb

ROOT = Path(__file__).resolve().parent.parent


XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def worker_suffix() -> str:
    """The suffix "_gw1" on xdist's worker gw1, "" in a plain run: for the databases the tests name."""
    return f"_{XDIST_WORKER}" if XDIST_WORKER else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, timeout: float, proc: subprocess.Popen[Any] | None = None, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-4000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    tail = log.read_text()[-4000:] if log is not None and log.exists() else ""
    raise TimeoutError(f"{url} did not answer within {timeout} s:\n{tail}")


def database_url_named(name: str) -> str:
    base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform")
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def recreate_database(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


class PlatformServer:
    """costplatform under gunicorn on a database of its own, so that the tests' own
    database flushes never touch what it stored. stop() and start() keep the data."""

    def __init__(self, workdir: Path, *, database: str = "", database_url: str | None = None) -> None:
        self.workdir = workdir
        self.database_url = database_url or database_url_named(database)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "platform.log"
        self.env = dict(
            os.environ,
            DATABASE_URL=self.database_url,
            SECRET_KEY="tests-only-secret",
            DJANGO_SUPERUSER_PASSWORD="pw-for-tests-only",
            DJANGO_SUPERUSER_USERNAME="tester",
            DJANGO_SUPERUSER_EMAIL="tester@example.com",
        )
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.key = ""

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, check=False
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def setup(self) -> PlatformServer:
        if templatedb.wanted():
            templatedb.database_copy(self.database_url)  # migrate below finds nothing to apply
        else:
            recreate_database(self.database_url)
        self.manage("migrate", "--no-input")
        self.manage("createsuperuser", "--no-input")
        # The serving tests run the vLLM /metrics reconciler with this key too.
        self.key = self.manage("create_collector_key", "--name", "serving-tests", "--reconciliation").strip()
        return self

    def start(self) -> None:
        handle = self.log.open("ab")
        command = [
            sys.executable, "-m", "gunicorn", "costplatform.wsgi:application",
            "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--timeout", "120",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # kill() reaches the master and its workers
        )
        try:
            wait_for(f"{self.url}/healthz", 60, self.proc, self.log)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL to the master and every worker at once (a crash: nothing is cleaned up)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        request = urllib.request.Request(f"{self.url}{path}?{query}")
        token = base64.b64encode(b"tester:pw-for-tests-only").decode()
        request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def records(self, **filters: str) -> list[dict[str, Any]]:
        """Every stored record matching the filters (all pages)."""
        out: list[dict[str, Any]] = []
        params = {"from": "2000-01-01T00:00:00Z", "limit": "1000", **filters}
        while True:
            page = self.get("/api/v1/records", **params)
            out.extend(page["results"])
            if not page.get("next"):
                return out
            params["cursor"] = page["next"]

    def wait_records(self, count: int, timeout: float = 60, **filters: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = self.records(**filters)
            if len(found) >= count:
                time.sleep(0.5)  # anything more (a duplicate would show up now)
                return self.records(**filters)
            time.sleep(0.5)
        raise AssertionError(f"{len(found)} records of {count} arrived within {timeout} s: {filters}")


class VllmServer:
    """The real vLLM OpenAI server on the CPU, started through `python -m serving`.

    In eager mode (`--enforce-eager`): the same engine, scheduler, KV cache and prefix caching,
    without torch.compile of the model's graph, which takes about 30 s a start and changes
    nothing the instrumentation sees. `make bench-serving` measures the compiled engine."""

    def __init__(self, workdir: Path, model: Path, platform: PlatformServer, *, extra: list[str] | None = None) -> None:
        self.workdir = workdir
        self.model = model
        self.platform = platform
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.spool = workdir / "spool"
        self.log = workdir / "vllm.log"
        self.extra = extra or []
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 300) -> VllmServer:
        env = dict(
            os.environ,
            VLLM_CPU_KVCACHE_SPACE="1",
            HF_HUB_OFFLINE="1",
            VLLM_NO_USAGE_STATS="1",
            COSTPLATFORM_STATS_WAIT="2",
        )
        command = [
            sys.executable, "-m", "serving",
            "--model", str(self.model),
            "--served-model-name", "tiny-llama",
            "--costplatform-url", self.platform.url,
            "--collector-key", self.platform.key,
            "--spool", str(self.spool),
            "--source", "test-server",
            "--dims", "env=test",
            "--cache-salt-dim", "business_line",
            "--model-version", "random-fp32",
            "--port", str(self.port),
            "--host", "127.0.0.1",
            "--max-model-len", "4096",
            "--enable-prefix-caching",
            "--dtype", "float32",
            "--enforce-eager",
            *self.extra,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            wait_for(f"{self.url}/health", timeout, self.proc, self.log)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            return response.read().decode()
