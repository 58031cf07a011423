"""The cluster on loopback: a PostgreSQL primary with PgBouncer (transaction pooling) in front of
it and a hot standby streaming from it, gunicorn web nodes behind nginx, Celery worker nodes on a
RabbitMQ virtual host of the cluster's own with the tasks on named queues, and beat once.

Who connects where (docs/scaling.md): web nodes, workers and beat through PgBouncer; page reads
to the standby (DATABASE_REPLICA_URL); migrations directly to the primary (DDL and the owner role
have no business in a transaction pool)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from costplatform.queues import QUEUES
from devtools.cluster.pgbouncer import PgBouncer
from devtools.cluster.postgres import PrivatePostgres, free_port

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "costplatform"
USER, PASSWORD = "operator", "cluster-only-password"
RABBITMQ = os.environ.get("CLUSTER_RABBITMQ", "127.0.0.1:5672")

NGINX_CONFIG = """\
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {root}/nginx-access.log;
    client_body_temp_path {root}/body; proxy_temp_path {root}/proxy; fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
    client_max_body_size 20m;
    upstream web {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://web;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_connect_timeout 2s;
            proxy_read_timeout 120s;
            # A node that dies mid-request: the request goes to the next one, a POST too; the
            # ingest API is idempotent by record id, so a repeated batch stores nothing twice.
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
        }}
    }}
}}
"""


class Process:
    """A command in its own process group, its output in a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.command, self.env, self.log = name, command, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        self.proc = subprocess.Popen(
            self.command, cwd=ROOT, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole group: a crash, nothing cleaned up."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        if self.alive():
            self._signal(signal.SIGTERM, wait=20)
        self.proc = None

    def _signal(self, sig: int, wait: float = 10) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(wait)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def wait_http(url: str, timeout: float, process: Process | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.proc is not None and process.proc.poll() is not None:
            raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@dataclass
class Cluster:
    """Bring it up with `up()`, down with `down()`; every process reachable to kill and restart."""

    web_nodes: int = 2
    worker_nodes: int = 2
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cp-cluster-")))
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.primary: PrivatePostgres | None = None
        self.standby: PrivatePostgres | None = None
        self.pgbouncer: PgBouncer | None = None
        self.vhost = f"cp-cluster-{os.getpid()}-{free_port()}"
        self.webs: list[Process] = []
        self.web_ports: list[int] = []
        self.workers: list[Process] = []
        self.beat: Process | None = None
        self.nginx: Process | None = None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = ""
        self.env: dict[str, str] = {}

    # --- up ---------------------------------------------------------------------------------

    def up(self) -> Cluster:
        self._databases()
        self._broker()
        self.env = self._env()
        self._setup()
        for n in range(self.web_nodes):
            self.webs.append(self._web(n))
        self._nginx()
        for n in range(self.worker_nodes):
            self.workers.append(self._worker(n).start())
        self.beat = Process("beat", [sys.executable, "-m", "celery", "-A", "costplatform", "beat",
                                     "--loglevel=INFO", "-s", str(self.root / "beat")],
                            self.env, self.root / "beat.log").start()  # fmt: skip
        for web, port in zip(self.webs, self.web_ports, strict=True):
            wait_http(f"http://127.0.0.1:{port}/healthz", 90, web)
        wait_http(f"{self.url}/healthz", 30, self.nginx)
        return self

    def _databases(self) -> None:
        self.primary = PrivatePostgres().init()
        self.primary.execute("postgres", f'CREATE DATABASE "{DATABASE}"')
        self.pgbouncer = PgBouncer(host="127.0.0.1", port=self.primary.port).start()

    def _broker(self) -> None:
        rabbitmqctl("add_vhost", self.vhost)
        rabbitmqctl("set_permissions", "-p", self.vhost, "guest", ".*", ".*", ".*")

    def _env(self) -> dict[str, str]:
        assert self.primary is not None and self.pgbouncer is not None
        env = dict(
            os.environ,
            DATABASE_URL=self.pgbouncer.url(DATABASE),
            CELERY_BROKER_URL=f"amqp://guest:guest@{RABBITMQ}/{self.vhost}",
            COSTPLATFORM_TASK_QUEUES="true",
            COSTPLATFORM_DB_TRANSACTION_POOLING="true",
            SECRET_KEY="cluster-only-secret",
            DJANGO_SETTINGS_MODULE="costplatform.settings",
            COSTPLATFORM_OUTBOUND_ALLOW="127.0.0.1/32",
            DJANGO_SUPERUSER_USERNAME=USER,
            DJANGO_SUPERUSER_PASSWORD=PASSWORD,
            DJANGO_SUPERUSER_EMAIL="operator@example.com",
        )
        env.pop("DATABASE_OWNER_URL", None)
        env.pop("CELERY_BROKER_TRANSPORT_OPTIONS", None)
        return env | self.extra_env

    def _manage(self, *args: str, direct: bool = False) -> str:
        assert self.primary is not None
        env = dict(self.env, DATABASE_URL=self.primary.url(DATABASE)) if direct else self.env
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr[-4000:]}")
        return done.stdout

    def _setup(self) -> None:
        assert self.primary is not None
        self._manage("migrate", "--no-input", "-v0", direct=True)
        self._manage("createsuperuser", "--no-input")
        self.key = self._manage("create_collector_key", "--name", "cluster", "--backfill").strip().splitlines()[-1]
        self.standby = self.primary.standby()  # after the schema, though it would stream it anyway
        self.env["DATABASE_REPLICA_URL"] = self.standby.url(DATABASE)

    def _web(self, n: int) -> Process:
        port = free_port()
        self.web_ports.append(port)
        command = [sys.executable, "-m", "gunicorn", "costplatform.wsgi:application", "--bind", f"127.0.0.1:{port}",
                   "--workers", "2", "--timeout", "120"]  # fmt: skip
        return Process(f"web{n}", command, self.env, self.root / f"web{n}.log").start()

    def _worker(self, n: int) -> Process:
        command = [sys.executable, "-m", "celery", "-A", "costplatform", "worker", "--pool=solo", "--loglevel=INFO",
                   "-Q", ",".join(QUEUES), "-n", f"node{n}@%h", "--without-gossip", "--without-mingle"]  # fmt: skip
        return Process(f"worker{n}", command, self.env, self.root / f"worker{n}.log")

    def _nginx(self) -> None:
        for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.root / name).mkdir(exist_ok=True)
        self.root.chmod(0o777)
        servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=2s;" for p in self.web_ports)
        config = self.root / "nginx.conf"
        config.write_text(NGINX_CONFIG.format(root=self.root, port=self.port, servers=servers))
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.nginx = Process("nginx", [binary, "-c", str(config), "-p", str(self.root)], self.env,
                             self.root / "nginx.log").start()  # fmt: skip

    # --- faults -----------------------------------------------------------------------------

    def restart_web(self, n: int) -> None:
        self.webs[n].start()
        wait_http(f"http://127.0.0.1:{self.web_ports[n]}/healthz", 90, self.webs[n])

    # --- down -------------------------------------------------------------------------------

    def down(self, keep: bool = False) -> None:
        for process in [self.nginx, self.beat, *self.workers, *self.webs]:
            if process is not None:
                process.stop()
        if self.pgbouncer is not None:
            self.pgbouncer.close()
        for pg in (self.standby, self.primary):
            if pg is not None:
                pg.close()
        try:
            rabbitmqctl("delete_vhost", self.vhost)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError):
            pass
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
