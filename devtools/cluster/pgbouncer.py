"""PgBouncer (the Debian package) in transaction pooling mode in front of a PostgreSQL server.

What the app needs through it (docs/scaling.md, "Through PgBouncer"): no named prepared statements
(Django's psycopg connections have prepare_threshold=None, and so have the server-binding cursors
made on them); no session state kept across transactions (the one session advisory lock, the
day-run's, is a transaction lock held in a transaction of its own; SET LOCAL elsewhere); the
ingest's temporary staging table is created IF NOT EXISTS and filled and read inside one
transaction, so whichever server connection a batch lands on works. Time zone and encoding are
parameters PgBouncer tracks per client.

    python -m devtools.cluster.pgbouncer -- python -m pytest tests/ingest     (make test-pooled)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from devtools.cluster.postgres import as_postgres, free_port

CONFIG = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {root}/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 1000
default_pool_size = {pool}
server_idle_timeout = 10
ignore_startup_parameters = extra_float_digits
logfile = {root}/pgbouncer.log
pidfile = {root}/pgbouncer.pid
"""


class PgBouncer:
    """One pgbouncer process on a free (or given) loopback port, in a directory of its own."""

    def __init__(self, *, host: str, port: int, listen: int = 0, pool: int = 20) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cp-pgbouncer-"))
        self.port = listen or free_port()
        (self.root / "pgbouncer.ini").write_text(
            CONFIG.format(host=host, port=port, listen=self.port, root=self.root, pool=pool)
        )
        (self.root / "userlist.txt").write_text('"postgres" ""\n')
        if as_postgres():
            shutil.chown(self.root, "postgres")
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 20) -> PgBouncer:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.proc = subprocess.Popen(
            [*as_postgres(), binary, str(self.root / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"pgbouncer did not listen on {self.port}:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # SIGINT: safe shutdown; the group: runuser's child too
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self) -> str:
        log = self.root / "pgbouncer.log"
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""


def pooled_url(url: str, port: int) -> str:
    """`url` (postgresql://…) with its host and port replaced by the pooler's on loopback."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"))


def main() -> int:
    parser = argparse.ArgumentParser(
        description="PgBouncer in transaction pooling mode in front of DATABASE_URL's server: in the foreground, "
        "or around a command run with DATABASE_URL pointing at it (e.g. -- python -m pytest tests/ingest).",
    )
    parser.add_argument("--port", type=int, default=0, help="loopback port to listen on (default: a free one)")
    parser.add_argument("--pool", type=int, default=20, help="server connections per database and user")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND: run it through the pooler, then stop")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform")
    target = urlsplit(url)
    bouncer = PgBouncer(host=target.hostname or "127.0.0.1", port=target.port or 5432, listen=args.port, pool=args.pool)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the pooler on the way out
    bouncer.start()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        if command:
            env = dict(os.environ, DATABASE_URL=pooled_url(url, bouncer.port))
            print(f"through PgBouncer (transaction pooling) 127.0.0.1:{bouncer.port}: {' '.join(command)}", flush=True)
            return subprocess.run(command, env=env).returncode
        print(f"PgBouncer (transaction pooling) on 127.0.0.1:{bouncer.port} -> {target.netloc}; Ctrl-C stops it")
        assert bouncer.proc is not None
        bouncer.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        bouncer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
