"""Monthly partitions of ingest_record: `[month, month + 1)` in UTC."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime

from django.db import connection

PARENT = "ingest_record"
# Advisory-lock namespace, so two batches never race to create the same partition.
_LOCK_NAMESPACE = 0x1A57


def month_start(value: date | datetime) -> date:
    return date(value.year, value.month, 1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def partition_name(month: date) -> str:
    return f"{PARENT}_y{month.year:04d}m{month.month:02d}"


def partitions_existing() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass ORDER BY c.relname",
            [PARENT],
        )
        return [row[0] for row in cursor.fetchall()]


def partitions_ensure(months: Iterable[date]) -> list[str]:
    """Create the missing partitions for these months, inside the caller's transaction.

    Returns the names created. The check is one catalog query, so calling this for every
    batch is cheap; creation takes an advisory lock so concurrent batches create it once.
    """
    wanted = {partition_name(m): m for m in {month_start(m) for m in months}}
    if not wanted:
        return []
    created = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", [list(wanted)])
        missing = sorted(set(wanted) - {row[0] for row in cursor.fetchall()})
        for name in missing:
            month = wanted[name]
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, month.year * 12 + month.month])
            cursor.execute("SELECT to_regclass(%s)", [name])
            if cursor.fetchone()[0] is not None:
                continue
            lower = datetime(month.year, month.month, 1, tzinfo=UTC).isoformat()
            upper = datetime.combine(next_month(month), datetime.min.time(), UTC).isoformat()
            cursor.execute(f"CREATE TABLE {name} PARTITION OF {PARENT} FOR VALUES FROM ('{lower}') TO ('{upper}')")
            created.append(name)
    return created


def partitions_ensure_ahead(*, today: date, months_ahead: int) -> list[str]:
    """This month's partition and the next `months_ahead` ones."""
    months = [month_start(today)]
    for _ in range(months_ahead):
        months.append(next_month(months[-1]))
    return partitions_ensure(months)
