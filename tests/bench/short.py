"""The short forms of the benchmarks: each `make bench-*` target's own command, read from the
Makefile with `make -n` (its prerequisites not run), with small data in BENCH_ARGS, so that a
change that breaks a benchmark fails the suite the day it is made, not the day someone next
runs the long form.

A short form that makes a database gets one of its own, named after the tests' database and
the xdist worker (costplatform_short_bench_pages_gw1 under `make test`), never a benchmark's
default database, and dropped afterwards; one that uses Celery gets this worker's Redis
database (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from tests.processes import ROOT, database_url_named, worker_suffix

# `make -o` treats these as made: the short forms run on the installed venv and the running services.
ALREADY_MADE = ("install", "services")


@dataclass(repr=False)
class Ran:
    command: str
    returncode: int
    output: str
    seconds: float

    def __repr__(self) -> str:  # what a failed assertion shows
        return f"{self.command}\nexit {self.returncode} after {self.seconds:.1f} s\n{self.output[-6000:]}"


def make_env() -> dict[str, str]:
    """This environment without the flags of a `make` running the suite (make test): the inner
    make must print the recipe alone."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}


def recipe(target: str, args: str) -> str:
    """The shell command `make <target>` runs, BENCH_ARGS (SOAK_ARGS for soak) being `args`."""
    skip = [flag for made in ALREADY_MADE for flag in ("-o", made)]
    command = ["make", "-n", "-s", "--no-print-directory", *skip, target, f"BENCH_ARGS={args}", f"SOAK_ARGS={args}"]
    done = subprocess.run(command, cwd=ROOT, env=make_env(), capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run(target: str, args: str, *, env: dict[str, str] | None = None, timeout: float = 300) -> Ran:
    """`make <target>`'s command with `args`, in the repository, `env` added to this environment."""
    command = recipe(target, args)
    began = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**make_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    ran = Ran(command, done.returncode, done.stdout + done.stderr, time.monotonic() - began)
    given = "".join(f"{name}={value} " for name, value in (env or {}).items())
    print(f"{given}{command}\nexit {ran.returncode} after {ran.seconds:.1f} s\n{ran.output}")  # shown when a test fails
    return ran


def database_name(kind: str) -> str:
    """costplatform_short_<kind>_gw0: the tests' database name, this form and this worker."""
    base = urllib.parse.urlsplit(os.environ.get("DATABASE_URL", "postgresql:///costplatform")).path.lstrip("/")
    return f"{base}_short_{kind}{worker_suffix()}"


@contextmanager
def database(kind: str) -> Iterator[str]:
    """The URL of a database for one short form (which makes it itself), dropped afterwards."""
    url = database_url_named(database_name(kind))
    try:
        yield url
    finally:
        parts = urllib.parse.urlsplit(url)
        admin = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def crashed(ran: Ran) -> bool:
    return "Traceback (most recent call last)" in ran.output
