"""New databases copied from a migrated one, for the tests and the benchmarks' short forms.

Migrating a database from nothing runs every migration: about 10 s here, most of it Django
rendering the models' states migration after migration. Copying a database that is already
migrated (`CREATE DATABASE ... TEMPLATE`, PostgreSQL's WAL_LOG copy) takes a tenth of a second.
`make test` makes a database for each worker, each server a test starts, and each benchmark
short form: they copy one template instead, and still run `migrate` afterwards, which finds
nothing to apply but does its post_migrate work (content types, permissions, the role groups).

The template is named after what a migration can read, so that a copy is what a `migrate` from
nothing would make there and then: the migrations' files, Django's version, the day (migrations
make the partitions around it), and the product's settings in the environment (COSTPLATFORM_*,
TZ). With DATABASE_OWNER_URL set, migrations run as another role on another URL: no template
then (`usable`). The first process to need it makes it, the others wait on a file lock;
a template made for older migrations is dropped when a new one is made.

    DATABASE_FROM_TEMPLATE=1   databases the benchmarks recreate are copies (the tests set it)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from costplatform.env import database_from_url

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "costplatform_template_"
ENV = "DATABASE_FROM_TEMPLATE"
_SETTINGS_READ = ("TZ",)


def wanted() -> bool:
    """Whether this process was asked to copy the template (DATABASE_FROM_TEMPLATE) and can."""
    return os.environ.get(ENV, "") not in {"", "0"} and usable()


def usable() -> bool:
    """Migrations connect as DATABASE_URL's role to its database (no DATABASE_OWNER_URL)."""
    return not os.environ.get("DATABASE_OWNER_URL")


def template_name() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "migrations").rglob("*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    import django

    digest.update(f"django {django.get_version()}\0day {date.today().isoformat()}\0".encode())
    for name in sorted(os.environ):
        if name.startswith("COSTPLATFORM_") or name in _SETTINGS_READ:
            digest.update(f"{name}={os.environ[name]}\0".encode())
    return PREFIX + digest.hexdigest()[:16]


def _admin_params(url: str) -> dict[str, Any]:
    """Connection parameters for the server of `url` (its maintenance database)."""
    db = database_from_url(url)
    params: dict[str, Any] = {"host": db["HOST"], "port": db["PORT"], "user": db["USER"], "password": db["PASSWORD"]}
    params |= db["OPTIONS"]  # type: ignore[call-overload]
    return {"dbname": "postgres", **{key: value for key, value in params.items() if value}}


def _url_named(url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _exists(conn: psycopg.Connection[Any], name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


@contextmanager
def _machine_lock(params: dict[str, Any], name: str) -> Iterator[None]:
    """One process on this machine makes a server's template; the others wait for it. A file
    lock, not an advisory lock: a session lock would not hold behind a transaction pooler."""
    where = f"{params.get('host', '')}_{params.get('port', '')}".replace("/", "_")
    path = Path(tempfile.gettempdir()) / f"{name}-{where}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def template_ready(url: str) -> str:
    """The name of the migrated template on `url`'s server, made first if it is not there."""
    if not usable():
        raise ValueError("no template with DATABASE_OWNER_URL set: migrations connect there")
    name = template_name()
    params = _admin_params(url)
    with psycopg.connect(autocommit=True, **params) as conn:
        if _exists(conn, name):
            return name
    with _machine_lock(params, name), psycopg.connect(autocommit=True, **params) as conn:
        if _exists(conn, name):
            return name
        building = f"{name}_{os.getpid()}"
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
        env = dict(os.environ, DATABASE_URL=_url_named(url, building))
        env.pop("DJANGO_SETTINGS_MODULE", None)
        done = manage_migrate(env)
        if done.returncode:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
            raise RuntimeError(f"migrating the template database failed:\n{done.stdout}\n{done.stderr}")
        conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(name)))
        _stale_drop(conn, keep=name)
    return name


def manage_migrate(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`manage.py migrate` from nothing in a process of its own, on `env`'s DATABASE_URL."""
    command = [sys.executable, "manage.py", "migrate", "--no-input", "-v0"]
    return subprocess.run(command, cwd=ROOT, env=dict(env), capture_output=True, text=True, check=False)


def _stale_drop(conn: psycopg.Connection[Any], *, keep: str) -> None:
    """Drop the templates of other migrations or days; one being copied right now stays."""
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE starts_with(datname, %s) AND datname <> %s", [PREFIX, keep]
    ).fetchall()
    for (stale,) in rows:
        try:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(stale)))
        except psycopg.errors.ObjectInUse:
            pass


def database_copy(url: str) -> None:
    """Drop the database of `url` if it is there and make it anew as a copy of the template."""
    name = str(database_from_url(url)["NAME"])
    for attempt in range(3):
        template = template_ready(url)
        with psycopg.connect(autocommit=True, **_admin_params(url)) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
                )
                return
            except psycopg.errors.InvalidCatalogName:
                # Dropped meanwhile by a process that made the next day's template: make it again.
                if attempt == 2:
                    raise
