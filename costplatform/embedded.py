"""Embedded services for a machine with nothing installed: PostgreSQL (pgserver) and a
filesystem Celery broker. Used only when DATABASE_URL / CELERY_BROKER_URL are unset."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from psycopg import sql

RUNTIME_ROLE = "costplatform_app"
DATABASE = "costplatform"


def embedded_database_urls(data_dir: Path) -> tuple[str, str]:
    """Start (or join) the PostgreSQL server whose data lives in `data_dir/postgres`.

    Returns (the app's URL, the owner's URL): the app connects as the DML-only role
    `costplatform_app`, made here when missing, and `manage.py migrate` as the server's
    superuser, which then grants the role its rows (costplatform/dbroles.py). The server
    listens on a socket in the data dir only, with the trust authentication pgserver sets up.

    The server is left running when this process exits, so the web process, the Celery
    worker and beat share one server, and the data survives restarts.
    """
    import pgserver

    pgdata = data_dir / "postgres"
    pgdata.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    for statement in setup_statements(exists=lambda query: "(1 row)" in server.psql(query)):
        server.psql(statement)
    info = server.get_postmaster_info()
    return info.get_uri(user=RUNTIME_ROLE, database=DATABASE), server.get_uri(DATABASE)


def setup_statements(*, exists: Callable[[str], bool]) -> Iterator[str]:
    """The psql statements that make the database and the runtime role where `exists` (a query's
    text to whether it found a row) says they are missing. psql takes text: each statement is
    composed, its names identifiers and its values literals, and rendered without a connection."""
    if not exists(_text(sql.SQL("SELECT 1 FROM pg_database WHERE datname = {};").format(sql.Literal(DATABASE)))):
        yield _text(sql.SQL("CREATE DATABASE {};").format(sql.Identifier(DATABASE)))
    if not exists(_text(sql.SQL("SELECT 1 FROM pg_roles WHERE rolname = {};").format(sql.Literal(RUNTIME_ROLE)))):
        # Processes starting together may both get here: the second one's CREATE is a no-op.
        yield _text(
            sql.SQL(
                "DO $$ BEGIN CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT; "
                "EXCEPTION WHEN duplicate_object THEN NULL; END $$;"
            ).format(sql.Identifier(RUNTIME_ROLE))
        )


def _text(statement: sql.Composable) -> str:
    return statement.as_string(None)


def filesystem_broker(data_dir: Path) -> tuple[str, dict[str, object]]:
    """kombu's filesystem transport: a broker that needs no server, for one machine."""
    folder = data_dir / "broker"
    (folder / "queue").mkdir(parents=True, exist_ok=True)
    (folder / "processed").mkdir(parents=True, exist_ok=True)
    (folder / "control").mkdir(parents=True, exist_ok=True)
    options = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        # Exchange tables (fanout: worker remote control). kombu's default is "control"
        # relative to the working directory, so every process must be given the same one.
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }
    return "filesystem://", options
