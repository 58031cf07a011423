"""Embedded services for a machine with nothing installed: PostgreSQL (pgserver) and a
filesystem Celery broker. Used only when DATABASE_URL / CELERY_BROKER_URL are unset."""

from __future__ import annotations

from pathlib import Path

RUNTIME_ROLE = "costplatform_app"


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
    database = "costplatform"
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {database};")
    role = server.psql(f"SELECT 1 FROM pg_roles WHERE rolname = '{RUNTIME_ROLE}';")
    if "(1 row)" not in role:
        # Processes starting together may both get here: the second one's CREATE is a no-op.
        server.psql(
            f"DO $$ BEGIN CREATE ROLE {RUNTIME_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT; "
            "EXCEPTION WHEN duplicate_object THEN NULL; END $$;"
        )
    info = server.get_postmaster_info()
    return info.get_uri(user=RUNTIME_ROLE, database=database), server.get_uri(database)


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
