"""`make run`: the whole product on one machine.

    python -m devtools.run [--port 8000] [--host 127.0.0.1] [--once] [--sample FILE | --no-sample] [--no-vllm]

Prepares the database (migrations, static files, record partitions for this month and
ahead, an `admin` superuser, a collector key `demo`), starts the web server (gunicorn), a
Celery worker and Celery beat as child processes, checks that the worker runs a task,
loads a sample file of token records through the HTTP API, prints the URL and the login,
and runs until Ctrl-C or SIGTERM, then stops its children.

Unless --no-vllm (or --once, where --vllm asks for it) it then runs the product end to end
(devtools/demo.py): a local webhook receiver registered as an alert channel, the tiny
model built into the data dir and served by the instrumented vLLM on the CPU (a child on
--port + 1, shipping to the platform with the collector key `vllm-demo`), and the workload of
devtools/workload.py through it for --workload-seconds, with progress on the terminal.

With no DATABASE_URL the settings start an embedded PostgreSQL (pgserver) whose data lives
in the data dir ($COSTPLATFORM_DATA_DIR, default .data/): migrations run as its superuser,
the app's processes as the DML-only role costplatform_app; with no CELERY_BROKER_URL the
broker is a folder of files in the data dir. Set them to use real servers: the children
inherit the environment. The admin password and the collector key's secret are kept in the
data dir (mode 600) and reused, as is the time the sample was first loaded: its records are
shifted to end at that time, so a rerun sends the same records and the API counts them as
duplicates instead of twice.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SAMPLE = BASE_DIR / "docs" / "samples" / "records.ndjson"
ADMIN_USER = "admin"
DEMO_KEY = "demo"
WORKER_CHECK_TASK = "apps.ingest.tasks.partitions_ensure_ahead"
HEALTH_TIMEOUT_S = 120
WORKER_TIMEOUT_S = 120
STOP_TIMEOUT_S = 20


class RunError(Exception):
    """A step failed; the message says which and what to do."""


_LAST_LINE = [time.monotonic()]


def say(message: str) -> None:
    """One line a step, with the seconds since the line before: what the step took."""
    now = time.monotonic()
    took, _LAST_LINE[0] = now - _LAST_LINE[0], now
    print(f"[run {took:5.1f} s] {message}", flush=True)


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def redact(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def data_dir_from_env() -> Path:
    """The data dir as settings compute it, known before settings are imported."""
    from costplatform.env import env

    return Path(env("COSTPLATFORM_DATA_DIR", str(BASE_DIR / ".data"))).resolve()


def secret_file(path: Path, make: Callable[[], str]) -> tuple[str, bool]:
    """The secret kept in `path` (mode 600), made on first use. Returns (secret, created)."""
    if path.exists():
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    value = make()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value, True


# --- embedded PostgreSQL -------------------------------------------------------------------


def _pg_system_user() -> str | None:
    # pgserver runs the server as the user `pgserver` when started by root (PostgreSQL refuses root).
    return "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def embedded_running(pgdata: Path) -> bool:
    if not (pgdata / "postmaster.pid").exists():
        return False
    from pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, OSError):
        return False
    return info is not None and info.is_running()


def embedded_stop(pgdata: Path) -> None:
    import pgserver

    pg_ctl = pgserver.pg_ctl  # type: ignore[attr-defined]  # made at import, one function a binary
    pg_ctl(["-m", "fast", "-w", "-t", "30", "stop"], pgdata=pgdata, user=_pg_system_user())


# --- database preparation -------------------------------------------------------------------


def check_database(embedded: bool) -> str:
    """Connect, and refuse a PostgreSQL older than 15. Returns a description of the server."""
    from django.conf import settings
    from django.db import OperationalError, connection

    try:
        connection.ensure_connection()
    except OperationalError as exc:
        name = settings.DATABASES["default"]["NAME"]
        hint = "" if embedded else f" (DATABASE_URL must name an existing database: `createdb {name}` makes it)"
        raise RunError(f"cannot connect to the database{hint}: {str(exc).strip()}") from exc
    version = connection.pg_version
    if version < 150000:
        raise RunError(f"PostgreSQL {version // 10000} is too old: costplatform needs PostgreSQL 15 or later")
    major_minor = f"{version // 10000}.{version % 10000}"
    if embedded:
        where = f"embedded PostgreSQL {major_minor} in {_shown(settings.DATA_DIR / 'postgres')} (DATABASE_URL not set)"
    else:
        where = f"PostgreSQL {major_minor} at {redact(settings.DATABASE_URL)} (DATABASE_URL)"
    return where + _roles(settings.DATABASES)


def _roles(databases: dict[str, Any]) -> str:
    """Which role the app and the migrations connect as, when they differ (costplatform/dbroles.py)."""
    if "owner" not in databases:
        return ""
    return f"; the app as {databases['default']['USER']}, migrations as {databases['owner']['USER']}"


def migrate() -> int:
    from django.core.management import call_command
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    from costplatform.dbroles import migration_alias

    # As the owner, which then grants the app's role its rows (costplatform/dbroles.py).
    executor = MigrationExecutor(connections[migration_alias()])
    pending = len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    call_command("migrate", interactive=False, verbosity=0)
    return pending


def collectstatic() -> int:
    import io

    from django.core.management import call_command

    # Returns a message such as "0 static files copied to '…', 180 unmodified."
    message = call_command("collectstatic", interactive=False, verbosity=1, stdout=io.StringIO()) or ""
    return int(message.split()[0]) if message[:1].isdigit() else 0


def ensure_partitions() -> list[str]:
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from apps.ingest.partitions import partitions_ensure_ahead

    with transaction.atomic():
        return partitions_ensure_ahead(today=timezone.now().date(), months_ahead=settings.PARTITIONS_AHEAD_MONTHS)


def ensure_admin(data_dir: Path) -> tuple[str | None, str]:
    """The `admin` superuser, in the `admin` group. Returns (password if it still works, note)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    password_file = data_dir / "admin_password"
    saved, _ = secret_file(password_file, lambda: secrets.token_urlsafe(12))
    password: str | None = saved
    user_model = get_user_model()
    user = user_model.objects.filter(username=ADMIN_USER).first()
    if user is None:
        user = user_model.objects.create_superuser(ADMIN_USER, email="", password=saved)
        note = f"created (password kept in {_shown(password_file)})"
    elif user.check_password(saved):
        note = f"exists (password from {_shown(password_file)})"
    else:
        note = (
            f"exists with a password other than the one in {_shown(password_file)} (changed since?); "
            f"left as it is: `python manage.py changepassword {ADMIN_USER}` sets a new one"
        )
        password = None
    group = Group.objects.filter(name=ADMIN_USER).first()
    if group is None:
        raise RunError("the `admin` group is missing (it comes with the accounts migrations)")
    user.groups.add(group)
    return password, note


def ensure_demo_key(
    data_dir: Path, name: str = DEMO_KEY, *, backfill: bool = False, reconciliation: bool = False
) -> tuple[str | None, str]:
    """The collector key `name` (default `demo`), its secret kept in the data dir (file
    collector_key_<name>). Returns (secret, note); no secret when the key is revoked.

    `backfill` and `reconciliation` are what the launcher's own senders need beyond a new key's
    limits: the sample is resent as it was first dated (older than 3 days on a later run), and
    the vLLM /metrics reconciler sends reconciliation records. A key made before keys had
    limits gets them too."""
    from apps.accounts.models import CollectorKey
    from apps.accounts.services import KEY_PREFIX, collector_key_create, key_digest

    key_file = data_dir / f"collector_key_{name}"
    needs = {field: True for field, wanted in (("backfill", backfill), ("reconciliation", reconciliation)) if wanted}
    if needs:
        CollectorKey.objects.filter(name=name).update(**needs)
    key = CollectorKey.objects.filter(name=name).first()
    saved = key_file.read_text().strip() if key_file.exists() else None
    if key is None:
        new = collector_key_create(name=name, backfill=backfill, reconciliation=reconciliation)
        key_file.unlink(missing_ok=True)
        secret, _ = secret_file(key_file, lambda: new.secret)
        return secret, f"created (secret kept in {_shown(key_file)})"
    if key.revoked_at is not None:
        return None, "is revoked; not sending the sample (make a new key in the admin, or un-revoke it)"
    if saved is not None and bytes(key.key_hash) == key_digest(saved):
        return saved, f"exists (secret from {_shown(key_file)})"
    # The key exists but its secret is not in this data dir (a new data dir on an old database):
    # give the same key a new secret, so the records stay under one source.
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    CollectorKey.objects.filter(pk=key.pk).update(prefix=secret[:10], key_hash=key_digest(secret))
    key_file.unlink(missing_ok=True)
    secret_file(key_file, lambda: secret)
    return secret, f"existed without its secret in this data dir: gave it a new one, kept in {_shown(key_file)}"


def demo_record_count() -> int:
    from apps.accounts.models import CollectorKey
    from apps.ingest.models import Record

    key = CollectorKey.objects.filter(name=DEMO_KEY).first()
    return Record.objects.filter(source_id=key.pk).count() if key else 0


# --- child processes --------------------------------------------------------------------------

_libc: Any = None
if sys.platform.startswith("linux"):
    try:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        _libc = None


def _die_with_parent() -> None:
    """In the child: get SIGTERM if run.py dies, so no server outlives it (Linux only)."""
    if _libc is not None:
        _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Child:
    """A server process in its own process group; its output goes to a log file."""

    def __init__(self, name: str, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log_handle: IO[bytes] = open(log, "wb")  # closed in close_log()
        self.process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches run.py only; run.py stops the children in order
            preexec_fn=_die_with_parent if _libc is not None else None,
        )

    def running(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        """Ask the main process to stop; gunicorn and Celery stop their own workers."""
        if self.running():
            self.process.send_signal(signal.SIGTERM)

    def kill_group(self) -> None:
        """SIGKILL whatever is left in the process group (the main process, or orphans of it)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join("    " + line for line in text.splitlines()[-lines:])

    def close_log(self) -> None:
        self._log_handle.close()


def stop_children(children: list[Child]) -> None:
    running = [child for child in children if child.running()]
    if running:
        say(f"stopping {', '.join(child.name for child in running)} …")
    for child in running:
        child.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    try:
        for child in running:
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{child.name} did not stop within {STOP_TIMEOUT_S} s; killing it")
    except KeyboardInterrupt:
        say("interrupted again; killing the children")
    for child in children:
        child.kill_group()
        if child.process.poll() is None:
            child.process.wait()
        child.close_log()


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


LOOPBACK = ("127.0.0.1", "localhost", "::1")
EVERY_INTERFACE = ("0.0.0.0", "::")


@dataclass(frozen=True)
class WebAddress:
    """Where the web server listens (`bind`), the URL this command itself calls (`base_url`),
    the one people open (`shown_url`) and the host names Django must accept beyond its own."""

    bind: str
    base_url: str
    shown_url: str
    allowed_hosts: tuple[str, ...]

    @property
    def beyond_loopback(self) -> bool:
        return bool(self.allowed_hosts)


def web_address(host: str, port: int) -> WebAddress:
    bracketed = f"[{host}]" if ":" in host else host
    if host in LOOPBACK:
        url = f"http://{bracketed}:{port}"
        return WebAddress(f"{bracketed}:{port}", url, url, ())
    if host in EVERY_INTERFACE:
        # Every interface answers, loopback included; people reach it by this machine's name.
        name = socket.gethostname()
        return WebAddress(f"{bracketed}:{port}", f"http://127.0.0.1:{port}", f"http://{name}:{port}", ("*",))
    url = f"http://{bracketed}:{port}"
    return WebAddress(f"{bracketed}:{port}", url, url, (host,))


def site_url_note(env: dict[str, str], web: WebAddress) -> str:
    """A warning where COSTPLATFORM_SITE_URL, set by hand, names this machine on another port
    than the one served: the links in alerts would open nothing, or another program."""
    site = urlsplit(env.get("COSTPLATFORM_SITE_URL", ""))
    served = urlsplit(web.shown_url)
    local = {"localhost", "127.0.0.1", "::1", socket.gethostname()}
    try:
        port = site.port or (443 if site.scheme == "https" else 80)
    except ValueError:
        return " (its port is not a number: links in alerts will not open; the system check says more)"
    if site.hostname in local and port != served.port:
        return f" (set by hand, but this run serves {web.shown_url}: links in alerts will not open here)"
    return ""


def wait_healthy(base_url: str, web: Child) -> float:
    started = time.monotonic()
    last_error = ""
    while time.monotonic() - started < HEALTH_TIMEOUT_S:
        if not web.running():
            raise RunError(f"the web server exited with status {web.process.returncode}:\n{web.tail()}")
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=5) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(exc)
        time.sleep(0.3)
    raise RunError(f"GET {base_url}/healthz did not answer 200 in {HEALTH_TIMEOUT_S} s ({last_error}):\n{web.tail()}")


def enqueue_worker_check() -> str:
    from apps.ingest.tasks import partitions_ensure_ahead

    try:
        result = partitions_ensure_ahead.apply_async(expires=WORKER_TIMEOUT_S * 5)
    except Exception as exc:  # kombu raises OperationalError and friends from the transport
        raise RunError(f"cannot send a task to the broker: {exc}") from exc
    return str(result.id)


def wait_worker_check(worker: Child, task_id: str) -> str:
    """Wait until the worker's log says it ran the task; return that line."""
    started = time.monotonic()
    marker = f"[{task_id}]"
    while time.monotonic() - started < WORKER_TIMEOUT_S:
        text = worker.log.read_text(errors="replace") if worker.log.exists() else ""
        for line in text.splitlines():
            if marker in line and (" succeeded in " in line or " raised " in line or " retry: " in line):
                if " succeeded in " not in line:
                    raise RunError(f"the worker ran the check task, and it failed:\n    {line.strip()}")
                return line.split("] ", 1)[-1].strip()
        if not worker.running():
            raise RunError(f"the Celery worker exited with status {worker.process.returncode}:\n{worker.tail()}")
        time.sleep(0.5)
    raise RunError(f"the Celery worker did not run task {task_id} within {WORKER_TIMEOUT_S} s:\n{worker.tail()}")


# --- demo prices --------------------------------------------------------------------------------

# An illustrative price list for the sample's models (CNY per 1M tokens) and a self-hosted pool
# for one of them, so the first run shows costs; edit or replace them in the admin.
DEMO_PRICES: dict[str, dict[str, str]] = {
    "meta-llama/Llama-3.1-70B-Instruct": {"input": "4", "cached_input": "1", "output": "12"},
    "meta-llama/Llama-3.1-8B-Instruct": {"input": "0.5", "cached_input": "0.1", "output": "1.5"},
    "Qwen/Qwen2.5-32B-Instruct": {"input": "2", "cached_input": "0.5", "output": "6"},
    "BAAI/bge-m3": {"input": "0.5", "cached_input": "0.5", "output": "0.5"},
}
DEMO_POOL = {
    "name": "demo-gpu-pool",
    "gpus": 1,
    "model_patterns": ["mistralai/*"],
    "capacity": 2_000_000,
}


def ensure_demo_prices() -> str:
    """The demo price list and pool, made once (when no price version exists yet)."""
    from decimal import Decimal

    from django.db.models import Min

    from apps.common.buckets import hour_floor
    from apps.ingest.models import Record
    from apps.pricing.models import PriceVersion
    from apps.pricing.services import cost_pool_create, price_version_create

    if PriceVersion.objects.exists():
        return "present"
    first = Record.objects.aggregate(first=Min("ts"))["first"] or datetime.now(UTC)
    since = hour_floor(first)
    prices = {model: {kind: Decimal(v) for kind, v in kinds.items()} for model, kinds in DEMO_PRICES.items()}
    price_version_create(effective_from=hour_floor(datetime(2000, 1, 1, tzinfo=UTC)), prices=prices, name="demo prices")
    cost_pool_create(**DEMO_POOL, cost_per_gpu_hour=Decimal("12"), effective_from=since)
    return (
        f"created an illustrative CNY price list for {len(prices)} models "
        f"and a pool for mistralai/* from {since:%Y-%m-%d %H:00}"
    )


def price_loaded() -> str:
    """Price what was loaded now rather than within the beat job's minute; a cost summary."""
    from decimal import Decimal

    from apps.pricing.selectors import costs_by_reason, unpriced_message, unpriced_models
    from apps.pricing.services import dirty_hours_price

    for _ in range(50):  # a month of days per call; the sample spans far less
        if not dirty_hours_price(max_days=31).hours:
            break
    start, end = datetime(2000, 1, 1, tzinfo=UTC), datetime.now(UTC) + timedelta(days=2)
    totals: dict[str, Decimal] = {}
    for row in costs_by_reason(start=start, end=end):
        totals[row.currency] = totals.get(row.currency, Decimal(0)) + row.cost
    summary = ", ".join(f"{amount.quantize(Decimal('0.01'))} {currency}" for currency, amount in totals.items())
    unpriced = unpriced_models(start=start, end=end)
    return f"{summary or 'nothing priced'}" + (f"; {unpriced_message(unpriced)}" if unpriced else "")


# --- the sample -----------------------------------------------------------------------------


def sample_anchor(data_dir: Path) -> tuple[datetime, bool]:
    """When the sample should end: the time of the first load, kept in the data dir."""
    now = datetime.now(UTC).replace(microsecond=0)
    value, created = secret_file(data_dir / "sample_anchor", now.isoformat)
    return datetime.fromisoformat(value), created


# The sample's deliberately invalid records (docs/samples/generate_records.py) have record ids
# starting so: they show what the platform refuses, one per kind of error.
DELIBERATE = ('"record_id":"bad-', '"record_id": "bad-')


def deliberate_lines(path: Path) -> set[int]:
    """The line numbers of `path`'s deliberately invalid records."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        return {number for number, text in enumerate(lines, 1) if any(mark in text for mark in DELIBERATE)}


def load_sample(path: Path, *, base_url: str, key: str, batch: int, data_dir: Path) -> None:
    from wire.send import SendError, send_file

    meant = deliberate_lines(path)
    anchor, first = sample_anchor(data_dir)
    when = anchor.strftime("%Y-%m-%d %H:%M:%S UTC")
    anchor_file = _shown(data_dir / "sample_anchor")
    if first:
        say(f"loading {_shown(path)}, timestamps shifted so it ends now ({when}, kept in {anchor_file})")
    else:
        say(
            f"loading {_shown(path)} again, shifted to end at {when} as on the first load, so its records "
            f"count as duplicates, not twice (delete {anchor_file} for a fresh copy dated now)"
        )
    if meant:
        say(
            f"  it holds {len(meant)} deliberately invalid records (record ids bad-…), one per kind of error, "
            "to show what the platform refuses: their refusals below are expected"
        )
    try:
        summary = send_file(path, url=base_url, key=key, batch=batch, ts_end=anchor)
    except (SendError, OSError) as exc:
        raise RunError(f"loading the sample failed: {exc}") from exc
    say(
        f"loaded: {summary.accepted} accepted, {summary.duplicates} duplicates, {summary.rejected} rejected "
        f"({summary.lines} lines in {summary.batches} requests)"
    )
    sample_report(summary.rejections, meant, base_url)
    say(f"database holds {demo_record_count()} token records from collector key '{DEMO_KEY}'")


def sample_report(rejections: list[Any], meant: set[int], base_url: str) -> None:
    """The refused lines: the sample's deliberately invalid ones introduced as such, any other
    as the problem it is."""
    as_meant = [r for r in rejections if r.line in meant]
    if as_meant:
        say(
            f"  {len(as_meant)} of them are the sample's deliberately invalid records (record ids bad-…), one per "
            "kind of error, refused as they should be:"
        )
        for rejection in as_meant:
            say(f"    as meant: {rejection}")
    others = [r for r in rejections if r.line not in meant]
    for rejection in others[:10]:
        say(f"  refused, NOT one of the deliberate ones: {rejection}")
    let_in = sorted(meant - {r.line for r in rejections})
    if let_in:
        numbers = ", ".join(map(str, let_in))
        say(f"  the deliberately invalid lines {numbers} were ACCEPTED: the ingest checks let them in")
    if rejections:
        say(f"  (refused records are kept: {base_url}/api/v1/rejections, the collectors page, or the admin)")


# --- main -----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.run",
        description=(
            "Start costplatform on one machine: migrate, create the admin user and a collector key, "
            "start the web server (gunicorn), a Celery worker and Celery beat, load a sample of token "
            "records through the API, print the URL and the login, and run until Ctrl-C. "
            "Without DATABASE_URL an embedded PostgreSQL keeps its data in the data dir; without "
            "CELERY_BROKER_URL the broker is a folder of files there."
        ),
        epilog=(
            "Environment: DATABASE_URL, CELERY_BROKER_URL (real servers; otherwise embedded), "
            "DATABASE_OWNER_URL (the role migrations run as; the app runs as DATABASE_URL's, DML only), "
            "COSTPLATFORM_DATA_DIR (default .data/ in the checkout), PORT. Children's output goes to "
            "DATA_DIR/logs/{web,worker,beat}.log. An embedded PostgreSQL that this command started is "
            "stopped when it exits; one that was already running is left running. From make: "
            "make run RUN_ARGS='--once --port 8001'. Exit status: 0 after a clean stop, 1 when a step or a "
            "child failed, 2 on bad arguments or a port in use."
        ),
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PORT") or 8000),
        help="web server port (default $PORT or 8000)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the web server listens on (default 127.0.0.1: this machine only). Another address, or "
        "0.0.0.0 for every interface, lets anyone who reaches it open the login page over plain HTTP: on a "
        "network you do not trust put a TLS proxy in front and set HTTPS=true (docs/security.md)",
    )
    parser.add_argument(
        "--once",
        "--exit-after-load",
        dest="once",
        action="store_true",
        help="after the sample is loaded and the worker checked, stop everything and exit (for tests)",
    )
    parser.add_argument(
        "--sample", type=Path, default=SAMPLE, metavar="FILE", help=f"NDJSON file to load (default {_shown(SAMPLE)})"
    )
    parser.add_argument("--no-sample", action="store_true", help="load nothing")
    parser.add_argument(
        "--vllm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "build the tiny model, start the instrumented vLLM on the CPU, a local webhook receiver as an "
            "alert channel, and drive the demo workload through vLLM (default: on, off with --once)"
        ),
    )
    parser.add_argument("--workload-seconds", type=float, default=180, help="how long the workload runs (default 180)")
    parser.add_argument("--vllm-port", type=int, default=0, help="vLLM port (default: --port + 1)")
    parser.add_argument("--receiver-port", type=int, default=0, help="webhook receiver port (default: --port + 2)")
    parser.add_argument("--batch", type=int, default=1000, help="records per ingest request (default 1000)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument(
        "--stop-db",
        action="store_true",
        help="only stop the embedded PostgreSQL of the data dir (if running) and exit",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")  # platformdirs, under pgserver
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    from costplatform.env import env

    data_dir = data_dir_from_env()
    pgdata = data_dir / "postgres"
    embedded_db = not env("DATABASE_URL")

    if args.stop_db:
        if embedded_running(pgdata):
            embedded_stop(pgdata)
            say(f"stopped the embedded PostgreSQL in {_shown(pgdata)}")
        else:
            say(f"no embedded PostgreSQL running in {_shown(pgdata)}")
        return 0
    if not 1 <= args.port <= 65535:
        say(f"--port {args.port} is not a port")
        return 2
    if not port_free(args.port, args.host):
        say(f"port {args.port} on {args.host} is in use or not an address of this machine; pass --port N or --host")
        return 2
    args.vllm = (not args.once) if args.vllm is None else args.vllm
    args.vllm_port = args.vllm_port or args.port + 1
    args.receiver_port = args.receiver_port or args.port + 2
    for flag, port in (("--vllm-port", args.vllm_port), ("--receiver-port", args.receiver_port)):
        if args.vllm and not port_free(port):
            say(f"port {port} on 127.0.0.1 is in use; pass {flag} N (or --no-vllm)")
            return 2
    if not args.no_sample and not args.sample.is_file():
        say(f"sample file {args.sample} not found (pass --sample FILE or --no-sample)")
        return 2

    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    started_db = embedded_db and not embedded_running(pgdata)
    children: list[Child] = []
    status = 0
    try:
        status = _run(args, data_dir, embedded_db, children)
    except RunError as exc:
        say(f"error: {exc}")
        status = 1
    except KeyboardInterrupt:
        print(flush=True)
        say("interrupted")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            stop_children(children)
            _stop_db(embedded_db, started_db, pgdata)
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    say("stopped" if status == 0 else f"stopped (exit status {status})")
    return status


def _stop_db(embedded_db: bool, started_db: bool, pgdata: Path) -> None:
    if not embedded_db:
        return
    if "django.db" in sys.modules:
        from django.db import connections

        connections.close_all()
    if started_db and embedded_running(pgdata):
        embedded_stop(pgdata)
        say("stopped the embedded PostgreSQL (its data stays in the data dir)")
    elif embedded_running(pgdata):
        say("left the embedded PostgreSQL running, as it was before (python -m devtools.run --stop-db stops it)")


def _fresh_dir(path: Path) -> Path:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _run(args: argparse.Namespace, data_dir: Path, embedded_db: bool, children: list[Child]) -> int:
    from costplatform.env import env

    say(f"data dir {_shown(data_dir)}")
    if embedded_db:
        say("starting the embedded PostgreSQL (pgserver) …")
    import logging

    import django

    logging.getLogger("axes.apps").setLevel(logging.WARNING)  # "AXES: BEGIN version …" at every setup
    django.setup()
    # Quiet libraries that log routine steps at INFO/WARNING through the root logger.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)  # "No hostname was supplied" (filesystem://)
    from django.conf import settings

    if settings.DATA_DIR != data_dir:
        raise RunError(f"settings use data dir {settings.DATA_DIR}, expected {data_dir}")
    say(f"database: {check_database(embedded_db)}")
    if env("CELERY_BROKER_URL"):
        say(f"broker: {redact(settings.CELERY_BROKER_URL)} (CELERY_BROKER_URL)")
    else:
        say(f"broker: files in {_shown(data_dir / 'broker')} (kombu filesystem transport; CELERY_BROKER_URL not set)")

    pending = migrate()
    say(f"migrations: {pending} applied" if pending else "migrations: up to date")
    copied = collectstatic()
    say(f"static files: {copied} copied to {_shown(Path(settings.STATIC_ROOT))}" if copied else "static files: present")
    created = ensure_partitions()
    say(f"record partitions: created {', '.join(created)}" if created else "record partitions: present, months ahead")
    password, admin_note = ensure_admin(data_dir)
    say(f"user '{ADMIN_USER}': {admin_note}")
    key_secret, key_note = ensure_demo_key(data_dir, backfill=True)
    say(f"collector key '{DEMO_KEY}': {key_note}")

    web = web_address(args.host, args.port)
    base_url = web.base_url
    child_env = dict(os.environ)
    if web.beyond_loopback:
        hosts = [h for h in child_env.get("ALLOWED_HOSTS", "").split(",") if h] or ["localhost", "127.0.0.1", "[::1]"]
        child_env["ALLOWED_HOSTS"] = ",".join([*hosts, *web.allowed_hosts])
        say(f"web: listening on {web.bind}, beyond this machine: plain HTTP, so only on a network you trust "
            "(or behind a TLS proxy with HTTPS=true)")  # fmt: skip
    # The links in alerts and the channels' previews open the site where it is served, unless set.
    child_env.setdefault("COSTPLATFORM_SITE_URL", web.shown_url)
    say(f"site URL (links in alerts): {child_env['COSTPLATFORM_SITE_URL']}{site_url_note(child_env, web)}")
    child_env.update(COSTPLATFORM_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    child_env.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    logs = data_dir / "logs"
    child_env["PROMETHEUS_MULTIPROC_DIR"] = str(_fresh_dir(data_dir / "prometheus"))  # /metrics sums the workers
    receiver = None
    if args.vllm:
        from devtools.demo import WebhookReceiver

        receiver = WebhookReceiver(logs / "webhook.log", say, port=args.receiver_port)
        say(f"webhook receiver: {receiver.url}/ (messages also in {_shown(logs / 'webhook.log')})")
        # The alert worker may post to it: loopback is blocked for channel URLs unless allowed.
        allow = [c for c in child_env.get("COSTPLATFORM_OUTBOUND_ALLOW", "").split(",") if c]
        child_env["COSTPLATFORM_OUTBOUND_ALLOW"] = ",".join([*allow, "127.0.0.1/32"])
    celery = [sys.executable, "-m", "celery", "-A", "costplatform.celery:app"]
    from django.db import connections

    connections.close_all()  # the children open their own
    children.append(Child("web", [
        sys.executable, "-m", "gunicorn", "costplatform.wsgi:application", "--bind", web.bind,
        "--workers", str(args.web_workers), "--timeout", "120", "--graceful-timeout", "10",
        "--access-logfile", "-", "--error-logfile", "-",
    ], logs / "web.log", child_env))  # fmt: skip
    children.append(Child("worker", [
        *celery, "worker", "--loglevel", "INFO", "--concurrency", str(args.worker_concurrency),
        "--without-gossip", "--without-mingle", "--hostname", "costplatform@%h",
    ], logs / "worker.log", child_env))  # fmt: skip
    children.append(Child("beat", [
        *celery, "beat", "--loglevel", "INFO",
        "--schedule", str(data_dir / "celerybeat-schedule"), "--pidfile", str(data_dir / "celerybeat.pid"),
    ], logs / "beat.log", child_env))  # fmt: skip
    for child in children:
        say(f"started {child.name} (pid {child.process.pid}, log {_shown(child.log)})")

    task_id = enqueue_worker_check()
    say(f"worker check: sent {WORKER_CHECK_TASK}[{task_id}]")
    say(f"web: {base_url}/healthz answered after {wait_healthy(base_url, children[0]):.1f} s")

    if args.no_sample:
        say("sample: not loaded (--no-sample)")
    elif key_secret is None:
        say("sample: not loaded (no usable collector key)")
    else:
        load_sample(args.sample, base_url=base_url, key=key_secret, batch=args.batch, data_dir=data_dir)
        say(f"prices: {ensure_demo_prices()}")
        say(f"cost of the stored tokens: {price_loaded()}")
    say(f"worker ran it: {wait_worker_check(children[1], task_id)}")
    for child in children:
        if not child.running():
            raise RunError(f"{child.name} exited with status {child.process.returncode}:\n{child.tail()}")

    login = f"{ADMIN_USER} / {password}" if password else f"{ADMIN_USER} (password changed since the first run)"
    print(flush=True)
    print("  costplatform is running", flush=True)
    print(f"  URL:       {web.shown_url}/", flush=True)
    print(f"  login:     {login}", flush=True)
    print(f"  API docs:  {base_url}/api/docs/", flush=True)
    print(f"  admin:     {base_url}/admin/", flush=True)
    print(f"  metrics:   {base_url}/metrics (Prometheus; Grafana dashboard docs/grafana/costplatform.json)", flush=True)
    print(f"  logs:      {_shown(logs)}/{{web,worker,beat{',vllm,webhook' if args.vllm else ''}}}.log", flush=True)
    if receiver is not None:
        print(f"  alerts:    {receiver.url}/ (the local webhook receiver: every message it got)", flush=True)
    print(flush=True)
    if receiver is not None:
        from devtools.demo import end_to_end

        end_to_end(args, data_dir=data_dir, base_url=base_url, env=child_env, children=children, receiver=receiver)
    if args.once:
        say("--once: exiting after the load")
        return 0
    say("press Ctrl-C to stop")
    while True:
        for child in children:
            if not child.running():
                raise RunError(f"{child.name} exited with status {child.process.returncode}:\n{child.tail()}")
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
