"""Backup and restore of the platform database with pg_dump / pg_restore (custom format, the
partitioned record table and every partition included), and a check that a restored copy holds
the same ledger and records as the original.

    python -m devtools.backup dump FILE              # $DATABASE_URL -> FILE
    python -m devtools.backup restore FILE URL       # FILE -> a new, empty database at URL
    python -m devtools.backup compare URL_A URL_B    # trial balance per month, records, rollups
    python -m devtools.backup drill                  # all three on $DATABASE_URL, into <name>_drill, dropped after

`compare` exits 1 and names what differs. See docs/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

# What must be equal between a database and its restored copy, one query each.
FINGERPRINT = {
    # The trial balance of every month and currency: each account's debits and credits.
    "trial balance": "SELECT l.period, l.currency, a.code, sum(l.debit), sum(l.credit) FROM ledger_journalline l "
    "JOIN ledger_account a ON a.id = l.account_id GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    "periods": "SELECT month, status FROM ledger_period ORDER BY month",
    "journal": "SELECT count(DISTINCT entry_id), count(*), sum(tokens) FROM ledger_journalline",
    "records": "SELECT date_trunc('month', ts), count(*), sum(prompt), sum(prompt_cached), sum(completion), "
    "sum(system), sum(tool) FROM ingest_record GROUP BY 1 ORDER BY 1",
    "record partitions": "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
    "WHERE i.inhparent = 'ingest_record'::regclass ORDER BY 1",
    "hourly usage": "SELECT count(*), sum(records), sum(prompt), sum(completion) FROM ingest_hourlyusage",
    "hourly classes": "SELECT count(*), sum(tokens) FROM classification_hourlyclass",
    "hourly costs": "SELECT currency, count(*), sum(cost) FROM pricing_hourlycost GROUP BY 1 ORDER BY 1",
    "dropped partitions": "SELECT month, records FROM ingest_droppedpartition ORDER BY month",
}


class BackupError(RuntimeError):
    pass


def pg_binary(name: str) -> str:
    """`name` from $PG_BIN, else the PostgreSQL 15 install, else PATH."""
    for folder in (os.environ.get("PG_BIN"), "/usr/lib/postgresql/15/bin"):
        if folder and (Path(folder) / name).exists():
            return str(Path(folder) / name)
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found: install the PostgreSQL client or set PG_BIN")
    return found


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BackupError(f"{Path(command[0]).name} failed ({done.returncode}):\n{done.stderr[-4000:]}")


def dump(*, url: str, path: Path) -> None:
    """pg_dump in the custom format (compressed; pg_restore can restore it in parallel)."""
    _run([pg_binary("pg_dump"), "--format=custom", "--no-owner", "--file", str(path), "--dbname", url])


def _admin_url(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def restore(*, path: Path, url: str, jobs: int = 1) -> None:
    """Create the database at `url` (it must not exist) and pg_restore the dump into it."""
    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            raise BackupError(f"database {name} exists: restore into a new one (or drop it first)")
        conn.execute(f'CREATE DATABASE "{name}"')
    # One transaction leaves nothing half restored; parallel jobs cannot share one.
    options = [f"--jobs={jobs}"] if jobs > 1 else ["--single-transaction"]
    _run([pg_binary("pg_restore"), *options, "--no-owner", "--exit-on-error", "--dbname", url, str(path)])


def fingerprint(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {name: [tuple(row) for row in conn.execute(sql).fetchall()] for name, sql in FINGERPRINT.items()}  # type: ignore[arg-type]


def compare(a: str, b: str) -> list[str]:
    """What differs between the two databases' fingerprints (empty when they agree)."""
    left, right = fingerprint(a), fingerprint(b)
    return [f"{name}: {left[name]} != {right[name]}" for name in FINGERPRINT if left[name] != right[name]]


def drill(*, url: str, folder: Path) -> list[str]:
    """Dump `url`, restore it into `<name>_drill` (dropped afterwards) and compare the two."""
    admin, name = _admin_url(url)
    copy = urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}_drill"))
    path = folder / f"{name}.dump"
    _drop(admin, f"{name}_drill")
    try:
        dump(url=url, path=path)
        restore(path=path, url=copy)
        return compare(url, copy)
    finally:
        _drop(admin, f"{name}_drill")
        path.unlink(missing_ok=True)


def _drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.backup", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    dumping = commands.add_parser("dump", help="pg_dump $DATABASE_URL to FILE (custom format)")
    dumping.add_argument("file", type=Path)
    restoring = commands.add_parser("restore", help="pg_restore FILE into a new database at URL")
    restoring.add_argument("file", type=Path)
    restoring.add_argument("url")
    restoring.add_argument("--jobs", type=int, default=1, help="parallel restore (not in one transaction)")
    comparing = commands.add_parser("compare", help="trial balances, records and rollups of two databases")
    comparing.add_argument("a")
    comparing.add_argument("b")
    commands.add_parser("drill", help="dump $DATABASE_URL, restore it into <name>_drill, compare, drop the copy")
    args = parser.parse_args(argv)
    url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform")
    try:
        if args.command == "dump":
            dump(url=url, path=args.file)
            print(f"dumped to {args.file} ({args.file.stat().st_size:,} bytes)")
            return 0
        if args.command == "restore":
            restore(path=args.file, url=args.url, jobs=args.jobs)
            print(f"restored {args.file} into {_admin_url(args.url)[1]}")
            return 0
        if args.command == "drill":
            with tempfile.TemporaryDirectory() as folder:
                differences = drill(url=url, folder=Path(folder))
            args.a = url
        else:
            differences = compare(args.a, args.b)
    except BackupError as exc:
        print(exc, file=sys.stderr)
        return 2
    for line in differences:
        print(f"DIFFERS {line}")
    if differences:
        return 1
    months = len({row[0] for row in fingerprint(args.a)["trial balance"]})
    print(f"same trial balance ({months} months), records, rollups and periods")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
