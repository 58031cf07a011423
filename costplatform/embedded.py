"""Embedded services for a machine with nothing installed: PostgreSQL (pgserver) and a
filesystem Celery broker. Used only when DATABASE_URL / CELERY_BROKER_URL are unset."""

from __future__ import annotations

from pathlib import Path


def embedded_database_url(data_dir: Path) -> str:
    """Start (or join) the PostgreSQL server whose data lives in `data_dir/postgres`.

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
    return server.get_uri(database)


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
