"""Run a command with the clock moved, for every process that reads it (`make test-dates`).

    python -m devtools.timeshift --at "2027-01-31 23:59" --zone Asia/Shanghai -- python -m pytest tests/ledger

How: a small preloaded library (devtools/timeshift.c, built with the machine's C compiler on
first use) adds one fixed offset to the wall clock (`clock_gettime(CLOCK_REALTIME)`,
`gettimeofday`, `time`) of the command and of everything it starts, through LD_PRELOAD and
TIMESHIFT_SECONDS in the environment: the test process, the web servers, Celery workers
and vLLM engines the tests start all read the same moved clock, running on from the instant
asked for. PostgreSQL's `now()` is the server's clock, so a private PostgreSQL cluster (initdb in
a temporary directory, its own port) is started with the same offset, and the command gets it
as DATABASE_URL. The monotonic clock, sleeps, timed waits and file times are left alone, so
every duration and timeout stays real.

Debian's libfaketime (0.9.10) was tried first and does not fit: with the monotonic clock moved,
Python's timed waits (`threading.Event.wait(0.5)`) never return; with it left alone, every
`time.sleep` fails with EINVAL.

With --accounting-zone the books are kept in the zone too (COSTPLATFORM_ACCOUNTING_TZ); tests
that fix their own zone keep it. The moved instant is passed on as COSTPLATFORM_MOVED_CLOCK (an
ISO instant), which tests/test_moved_clock.py uses to check that every clock was moved.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from devtools.cluster.postgres import PrivatePostgres

SOURCE = Path(__file__).with_suffix(".c")


def preload_library() -> str:
    """The built shim, made once per version of its source (in the temporary directory)."""
    source = SOURCE.read_bytes()
    built = Path(tempfile.gettempdir()) / f"costplatform-timeshift-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if not built.exists():
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise SystemExit("a C compiler (cc or gcc) is needed to build devtools/timeshift.c")
        partial = built.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(partial), str(SOURCE), "-ldl"], check=True)
        partial.chmod(0o755)
        partial.replace(built)
    return str(built)


def instant(text: str, zone: str) -> datetime:
    """An instant from "YYYY-MM-DD HH:MM" in `zone`, or "+<N>d" (N days after the real now).
    A wall time that does not exist in the zone (a spring-forward gap) is read as the zone's
    rules read it: fold 0, the offset before the change."""
    if text.startswith("+") and text.endswith("d"):
        return datetime.now(UTC) + timedelta(days=float(text[1:-1]))
    wall = datetime.fromisoformat(text)
    if wall.tzinfo is None:
        wall = wall.replace(tzinfo=ZoneInfo(zone))
    return wall.astimezone(UTC)


def moved_env(offset: int) -> dict[str, str]:
    return {
        "LD_PRELOAD": " ".join(filter(None, [preload_library(), os.environ.get("LD_PRELOAD", "")])),
        "TIMESHIFT_SECONDS": str(offset),
    }


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # the private PostgreSQL is stopped on the way out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.timeshift",
        description="Run a command with the clock of it, its children and a private PostgreSQL moved to an instant.",
    )
    parser.add_argument("--at", required=True, help='"YYYY-MM-DD HH:MM" in --zone, or "+400d" (days after now)')
    parser.add_argument("--zone", default="UTC", help="the zone --at is read in (default UTC)")
    parser.add_argument(
        "--accounting-zone", action="store_true", help="keep the books in --zone too (COSTPLATFORM_ACCOUNTING_TZ)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")

    signal.signal(signal.SIGTERM, _stop)
    target = instant(args.at, args.zone)
    offset = round(target.timestamp() - time.time())
    env = moved_env(offset)
    database = PrivatePostgres().init(env=env)
    try:
        child = {**os.environ, **env, "COSTPLATFORM_MOVED_CLOCK": target.isoformat()}
        child["DATABASE_URL"] = database.url(_database_name())
        if args.accounting_zone:
            child["COSTPLATFORM_ACCOUNTING_TZ"] = args.zone
        print(
            f"timeshift: clock moved to {target.astimezone(ZoneInfo(args.zone)).isoformat()} ({args.zone}), "
            f"{offset:+d} s; PostgreSQL on port {database.port}"
            + (f"; accounting zone {args.zone}" if args.accounting_zone else ""),
            flush=True,
        )
        return subprocess.run(command, env=child, check=False).returncode
    finally:
        database.close()


def _database_name() -> str:
    """The database name of the DATABASE_URL the command would have had (pytest-django makes
    test_<name> beside it), so only the server changes."""
    url = os.environ.get("DATABASE_URL", "")
    return urlsplit(url).path.lstrip("/") or "costplatform"


if __name__ == "__main__":
    sys.exit(main())
