"""A private PostgreSQL cluster (the fault suite's, `make cluster`'s primary and hot standby):
initdb into a temporary directory, its own port and socket directory, so that it can be
restarted and crashed while records stream in without touching the shared server other tests use."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_postgres() -> list[str]:
    """The command prefix that runs a PostgreSQL tool as the postgres user when we are root
    (PostgreSQL and PgBouncer refuse to run as root)."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


BIN_CANDIDATES = [Path("/usr/lib/postgresql") / v / "bin" for v in ("17", "16", "15", "14")]


def _bindir() -> Path:
    configured = os.environ.get("FAULTS_PG_BIN")
    if configured:
        return Path(configured)
    for candidate in BIN_CANDIDATES:
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError("initdb not found: install PostgreSQL server binaries or set FAULTS_PG_BIN")


class PrivatePostgres:
    """initdb + pg_ctl on a free port; restart() and crash() while clients are connected."""

    def __init__(self) -> None:
        self.bin = _bindir()
        self.env: dict[str, str] = {}  # set for the server alone (devtools/timeshift.py: a moved clock)
        self.root = Path(tempfile.mkdtemp(prefix="cp-faults-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        # PostgreSQL refuses to run as root: the cluster then belongs to the postgres user.
        self._as_owner = as_postgres()
        if self._as_owner:
            shutil.chown(self.root, "postgres")

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        server_env = ["env", *(f"{name}={value}" for name, value in self.env.items())] if self.env else []
        return subprocess.run(
            [*self._as_owner, *server_env, str(self.bin / tool), *args], capture_output=True, text=True, check=check
        )

    def standby(self) -> PrivatePostgres:
        """A hot standby of this cluster on a port of its own: pg_basebackup -R (the WAL streamed
        during the copy, the replication settings written), then started, streaming from here."""
        standby = PrivatePostgres()
        standby._pg(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-D", str(standby.data),
            "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        return standby.start()

    def query(self, database: str, sql: str) -> Any:
        """The first column of the first row of `sql`."""
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            row = conn.execute(sql.encode()).fetchone()
        return row[0] if row else None

    def init(self, env: dict[str, str] | None = None) -> PrivatePostgres:
        self.env = dict(env or {})
        self._pg("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        return self.start()

    def start(self) -> PrivatePostgres:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        done = self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start", check=False)
        if done.returncode:
            raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}\n{self.log_tail()}")
        return self

    def stop(self, mode: str = "fast") -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast", down_for: float = 0.0) -> None:
        """Stop (fast: sessions are ended and their transactions rolled back; immediate: a crash,
        recovered from the WAL on start), stay down `down_for` seconds, start again."""
        self.stop(mode)
        time.sleep(down_for)
        self.start()

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def execute(self, database: str, sql: str) -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql.encode())

    def copy(self, source: str, target: str) -> None:
        """CREATE DATABASE target TEMPLATE source; idle connections to the source are ended first."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)'.encode())
            for _ in range(20):
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [source])
                try:
                    conn.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"'.encode())
                    return
                except psycopg.errors.ObjectInUse:
                    time.sleep(0.1)
        raise RuntimeError(f"database {source} stayed in use")
