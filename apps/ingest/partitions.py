"""Monthly partitions of ingest_record: `[month, month + 1)` in UTC.

These months are storage, not accounting: they stay UTC whatever COSTPLATFORM_ACCOUNTING_TZ
says (a change of zone must not re-partition the records), so they keep their own month
helpers rather than apps/common/buckets.py. An accounting month spans two partitions at most.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime

from django.db import connection

from apps.ingest.models import Record

PARENT = Record._meta.db_table


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
    batch is cheap. The app's database role may not run DDL: creation goes through
    `ingest_record_partition_create`, a function owned by the migrations' role
    (migrations/ingest/0008_partition_functions.py), which also serialises concurrent batches.
    """
    wanted = {partition_name(m): m for m in {month_start(m) for m in months}}
    if not wanted:
        return []
    created = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", [list(wanted)])
        missing = sorted(set(wanted) - {row[0] for row in cursor.fetchall()})
        for name in missing:
            cursor.execute("SELECT ingest_record_partition_create(%s)", [wanted[name]])
            if cursor.fetchone()[0] is not None:
                created.append(name)
    return created


def partition_drop(month: date) -> str | None:
    """Detach and drop the partition of a month before this one, in the caller's transaction,
    through the owner's function as creation does. Returns its name, None when there was none."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT ingest_record_partition_drop(%s)", [month_start(month)])
        name: str | None = cursor.fetchone()[0]
    return name


def partitions_ensure_ahead(*, today: date, months_ahead: int) -> list[str]:
    """This month's partition and the next `months_ahead` ones."""
    months = [month_start(today)]
    for _ in range(months_ahead):
        months.append(next_month(months[-1]))
    return partitions_ensure(months)
