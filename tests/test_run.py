"""`make run` (devtools/run.py) on embedded defaults, and the sample loader it uses.

The slow test runs `python -m devtools.run --once` twice on one data dir with DATABASE_URL
and CELERY_BROKER_URL removed, so it uses the embedded PostgreSQL (pgserver) and the
filesystem broker, whatever servers the rest of the suite uses.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from devtools.run import WebAddress
from wire.send import endpoint_url, latest_ts, shift_line

REPO = Path(__file__).resolve().parent.parent
LOCAL = "http://127.0.0.1:8000"
SERVER_VARIABLES = ("DATABASE_URL", "DATABASE_URL_FILE", "CELERY_BROKER_URL", "CELERY_BROKER_URL_FILE", "PORT")


def test_collectors_never_import_django() -> None:
    code = "import sys, collectors.send; sys.exit(any(m.split('.')[0] in ('django', 'apps') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


# Imports refused to the platform alone: what only the serving extra (vLLM's CPU build) brings.
SERVING_ONLY = ("vllm", "torch", "transformers")
_PLATFORM_ALONE = f"""
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVING_ONLY!r}:
            raise ImportError(f"{{name}} is not part of the platform alone")
sys.meta_path.insert(0, Refuse())
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns  # every app's URL conf and views
import devtools.run, costplatform.celery, apps.dashboards.views, apps.finance.pages.finance
"""


def test_the_platform_runs_without_vllm_or_torch() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "costplatform.settings"}
    done = subprocess.run([sys.executable, "-c", _PLATFORM_ALONE], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_run_listens_on_loopback_unless_told_otherwise() -> None:
    from devtools.run import web_address

    assert web_address("127.0.0.1", 8000) == WebAddress("127.0.0.1:8000", LOCAL, LOCAL, ())
    every = web_address("0.0.0.0", 8000)
    assert (every.bind, every.base_url, every.allowed_hosts) == ("0.0.0.0:8000", LOCAL, ("*",))
    assert every.shown_url == f"http://{socket.gethostname()}:8000" and every.beyond_loopback
    one = web_address("10.1.2.3", 8001)
    assert (one.bind, one.base_url, one.allowed_hosts) == ("10.1.2.3:8001", "http://10.1.2.3:8001", ("10.1.2.3",))
    assert web_address("::1", 8000).bind == "[::1]:8000"


def test_make_run_without_vllm_installs_the_platform_alone() -> None:
    # -n: print what would run; -W: as if pyproject.toml had just changed (both stamps out of date).
    args = ["make", "-n", "-W", "pyproject.toml", "run", "RUN_ARGS=--no-vllm"]
    plan = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "devtools/install.py .venv base" in plan and "install.py .venv all" not in plan
    full = subprocess.run([*args[:-1], "RUN_ARGS=--once"], cwd=REPO, capture_output=True, text=True, check=True)
    assert "devtools/install.py .venv all" in full.stdout
    # What each level installs (devtools/install.py): the platform alone, or everything.
    from devtools.install import EXTRAS

    assert EXTRAS == {"base": "collectors", "all": "dev,serving,warehouse"}


def test_shift_line_moves_valid_timestamps_only() -> None:
    line = b'{"record_id":"a","ts":"2025-01-15T12:00:00.250Z","model":"m"}'
    moved = json.loads(shift_line(line, timedelta(days=1, hours=1)))
    assert moved == {"record_id": "a", "ts": "2025-01-16T13:00:00.250Z", "model": "m"}
    for unreadable in (b'{"record_id":"b","ts":"2025-01-15T12:00:00"}', b'{"record_id":"c",', b"[1]"):
        assert shift_line(unreadable, timedelta(days=1)) == unreadable
    assert latest_ts([line, b"nonsense", b'{"ts":"2025-01-15T13:00:00+01:00"}']) == datetime(
        2025, 1, 15, 12, 0, 0, 250000, tzinfo=UTC
    )


def test_endpoint_url() -> None:
    assert endpoint_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/api/v1/records"
    assert endpoint_url("http://h:1/") == "http://h:1/api/v1/records"
    assert endpoint_url("https://h/api/v1/records") == "https://h/api/v1/records"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_once(data_dir: Path, *extra: str) -> tuple[int, str]:
    env = {name: value for name, value in os.environ.items() if name not in SERVER_VARIABLES}
    env["COSTPLATFORM_DATA_DIR"] = str(data_dir)
    command = [sys.executable, "-m", "devtools.run", "--once", "--port", str(_free_port()), *extra]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=420)
    return done.returncode, done.stdout + done.stderr


def _number(pattern: str, output: str) -> tuple[int, ...]:
    match = re.search(pattern, output)
    assert match, f"{pattern!r} not in the output:\n{output}"
    return tuple(int(group) for group in match.groups())


def _processes_of(data_dir: Path) -> list:
    """Processes started for this data dir: postgres and beat name it on their command line,
    gunicorn and the Celery worker have it in their environment."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(data_dir) in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
            elif proc.environ().get("COSTPLATFORM_DATA_DIR") == str(data_dir):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _stop_leftovers(data_dir: Path) -> None:
    """Stop what a failed run may have left: the embedded PostgreSQL (pgserver leaves it
    running by design), then any other process of this data dir."""
    import warnings

    import psutil

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        import pgserver

    pgdata = data_dir / "postgres"
    if (pgdata / "postmaster.pid").exists():
        user = "pgserver" if os.geteuid() == 0 else None
        try:
            pgserver.pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=pgdata, user=user)
        except subprocess.CalledProcessError:
            pass
    for proc in _processes_of(data_dir):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.mark.slow
def test_make_run_on_embedded_defaults_keeps_data_across_restarts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    try:
        status, first = _run_once(data_dir)
        assert status == 0, first
        assert "database: embedded PostgreSQL" in first, first
        assert "broker: files in" in first, first
        assert re.search(r"URL:\s+http://127\.0\.0\.1:\d+/", first), first
        password = (data_dir / "admin_password").read_text().strip()
        assert f"login:     admin / {password}" in first
        assert (data_dir / "admin_password").stat().st_mode & 0o777 == 0o600
        assert (data_dir / "collector_key_demo").stat().st_mode & 0o777 == 0o600
        assert "API docs:  http://127.0.0.1:" in first
        assert "worker ran it: Task apps.ingest.tasks.partitions_ensure_ahead[" in first, first
        accepted, duplicates, rejected = _number(r"loaded: (\d+) accepted, (\d+) duplicates, (\d+) rejected", first)
        assert accepted > 0 and rejected > 0
        (held,) = _number(r"database holds (\d+) token records", first)
        assert held == accepted
        assert "stopped the embedded PostgreSQL" in first
        assert not _wait_gone(data_dir), "processes left after the first run"

        status, second = _run_once(data_dir, "--host", "0.0.0.0")  # every interface this time
        assert status == 0, second
        assert f"URL:       http://{socket.gethostname()}:" in second and "only on a network you trust" in second
        assert f"login:     admin / {password}" in second
        again = _number(r"loaded: (\d+) accepted, (\d+) duplicates, (\d+) rejected", second)
        assert again == (0, accepted + duplicates, rejected), second
        assert _number(r"database holds (\d+) token records", second) == (held,)
        assert not _wait_gone(data_dir), "processes left after the second run"
    finally:
        _stop_leftovers(data_dir)


def _wait_gone(data_dir: Path, seconds: float = 15) -> list:
    deadline = time.monotonic() + seconds
    while True:
        left = _processes_of(data_dir)
        if not left or time.monotonic() > deadline:
            return [f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}" for proc in left]
        time.sleep(0.5)
