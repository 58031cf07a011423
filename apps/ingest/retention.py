"""Retention of raw records: the monthly partitions of ingest_record older than
RETENTION_MONTHS are detached and dropped whole (never a DELETE); the hourly rollups
(HourlyUsage, HourlyClass, HourlyCost) and the ledger are kept forever. Refused records
(Rejection) are deleted after REJECTIONS_RETENTION_DAYS.

What needs the raw records of a month (reclassification, the monthly audit) asks
`records_gone` first and refuses a month whose partition was dropped, saying so; ingest refuses
records before the horizon, so a dropped month is never made again.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from apps.common.composed import SQL, Identifier, Literal, text
from apps.ingest.models import DroppedPartition, Rejection
from apps.ingest.partitions import PARENT, month_start, partition_drop, partitions_existing

log = logging.getLogger(__name__)

_NAME = re.compile(rf"^{PARENT}_y(\d{{4}})m(\d{{2}})$")
# DETACH takes an ACCESS EXCLUSIVE lock on ingest_record: wait this long for ingest and
# reclassification to let go, else give up until the next run rather than stall them.
LOCK_TIMEOUT = "5s"
_LOCK_TIMEOUT = text(SQL("SET LOCAL lock_timeout = {}").format(Literal(LOCK_TIMEOUT)))


class RecordsGone(ValueError):
    """The raw records of a month were dropped by retention."""


def months_back(month: date, months: int) -> date:
    index = month.year * 12 + month.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def retention_horizon(*, today: date, months: int | None = None) -> date | None:
    """The first month whose raw records are kept: this month and the `months` before it are
    kept (None when retention is off, months = 0)."""
    months = settings.RETENTION_MONTHS if months is None else months
    if months <= 0:
        return None
    return months_back(month_start(today), months)


def partition_month(name: str) -> date | None:
    found = _NAME.match(name)
    return date(int(found[1]), int(found[2]), 1) if found else None


@dataclass(frozen=True)
class PartitionDrop:
    month: date
    partition: str
    records: int


def partitions_expired(*, today: date, months: int | None = None) -> list[PartitionDrop]:
    """The record partitions entirely before the horizon, oldest first, with their row counts."""
    horizon = retention_horizon(today=today, months=months)
    if horizon is None:
        return []
    out = []
    for name in partitions_existing():
        month = partition_month(name)
        if month is not None and month < horizon:
            with connection.cursor() as cursor:
                cursor.execute(text(SQL("SELECT count(*) FROM {}").format(Identifier(name))))
                out.append(PartitionDrop(month, name, int(cursor.fetchone()[0])))
    return out


def partitions_drop_expired(*, today: date, months: int | None = None, dry_run: bool = False) -> list[PartitionDrop]:
    """Detach and drop every record partition before the horizon, one transaction each, and
    note each in DroppedPartition. With dry_run, only say which would go."""
    expired = partitions_expired(today=today, months=months)
    if dry_run:
        return expired
    for drop in expired:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_LOCK_TIMEOUT)
            partition_drop(drop.month)
            DroppedPartition.objects.update_or_create(
                month=drop.month, defaults={"partition": drop.partition, "records": drop.records}
            )
        log.info("retention: dropped %s (%s records)", drop.partition, drop.records)
    return expired


def rejections_delete_expired(*, now: datetime, days: int | None = None, dry_run: bool = False) -> int:
    """Delete refused records received more than `days` ago (0: keep them). Returns how many."""
    days = settings.REJECTIONS_RETENTION_DAYS if days is None else days
    if days <= 0:
        return 0
    old = Rejection.objects.filter(received_at__lt=now - timedelta(days=days))
    return old.count() if dry_run else old.delete()[0]


def records_gone(*, start: datetime | date, end: datetime | date) -> list[date]:
    """The months overlapping [start, end) whose raw records retention has dropped."""
    first, last = month_start(start), _last_month(end)
    return list(DroppedPartition.objects.filter(month__gte=first, month__lte=last).values_list("month", flat=True))


def records_available_check(*, start: datetime | date, end: datetime | date, what: str) -> None:
    """Raise RecordsGone, naming the months, when `what` would need raw records that are gone."""
    gone = records_gone(start=start, end=end)
    if gone:
        months = ", ".join(f"{m:%Y-%m}" for m in gone)
        raise RecordsGone(
            f"{what} needs the raw records of {months}, which retention has dropped "
            f"(COSTPLATFORM_RETENTION_MONTHS={settings.RETENTION_MONTHS}); the hourly rollups and "
            "the ledger of those months are kept as they are."
        )


def ingest_max_age(*, now: datetime) -> timedelta:
    """How old a record may be at ingest: INGEST_MAX_AGE_DAYS, and never before the retention
    horizon (a record there would land in a month whose partition retention drops)."""
    max_age = timedelta(days=settings.INGEST_MAX_AGE_DAYS)
    horizon = retention_horizon(today=now.date())
    if horizon is None:
        return max_age
    return min(max_age, now - datetime.combine(horizon, datetime.min.time(), UTC))


def _last_month(end: datetime | date) -> date:
    """The month of the last instant before `end`."""
    if isinstance(end, datetime):
        return month_start(end - timedelta(microseconds=1))
    return month_start(end - timedelta(days=1))
