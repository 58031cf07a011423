"""A month's priced rollups and journal lines as Parquet files for warehouses, written to a
directory or an S3-compatible bucket:

    <to>/rollups/month=2026-11/part-0.parquet   pricing's hourly cost rows of the month's window
    <to>/journal/month=2026-11/part-0.parquet   the journal lines posted in the month

Money is decimal128 (the database's scale: 12 places for priced rows, 2 for the journal), the
hour is a UTC timestamp with its zone, days and periods are dates of the accounting calendar.
The rollups are the hours of the month's window (`month_window`: a closed month keeps the
edges of the zone it was closed in). Rows are read in keyset pages of `batch_rows` inside one
repeatable-read snapshot (both files see the same books) and each page is one row group, so a
month of millions of rows never sits in memory. Rows are in a fixed order and the files carry
no export time, so a closed month exports to the same bytes. A run replaces the month's
partition: the new part is written beside the old, moved over it, and other files there removed.

S3: credentials and region come from boto3's usual sources (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_DEFAULT_REGION, AWS_PROFILE); an S3-compatible
store is reached with COSTPLATFORM_S3_ENDPOINT_URL (path-style addressing).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection, models, transaction

from apps.accounts.models import CollectorKey
from apps.classification.engine import COMPONENTS
from apps.classification.models import Reason
from apps.common.buckets import month_days, month_of
from apps.ingest.models import DimSet, ServedModel
from apps.ledger.models import JournalLine
from apps.ledger.services.accrual import MonthWindow, month_window
from apps.pricing.models import CostPool, HourlyCost

BATCH_ROWS = 50_000
PART = "part-0.parquet"
COMPRESSION = "zstd"

ROLLUPS = pa.schema(
    [
        ("hour", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("source", pa.string()),
        ("model", pa.string()),
        ("model_version", pa.string()),
        ("business_line", pa.string()),
        ("dims", pa.string()),
        ("reason", pa.string()),
        ("token_class", pa.string()),
        ("component", pa.string()),
        ("tokens", pa.int64()),
        ("cost", pa.decimal128(30, 12)),
        ("currency", pa.string()),
        ("price_version_id", pa.int64()),
        ("pool", pa.string()),
    ]
)
JOURNAL = pa.schema(
    [
        ("line_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("entry_kind", pa.string()),
        ("period", pa.date32()),
        ("day", pa.date32()),
        ("adjusts", pa.date32()),
        ("account_code", pa.string()),
        ("account_name", pa.string()),
        ("account_kind", pa.string()),
        ("cost_centre", pa.string()),
        ("model", pa.string()),
        ("model_version", pa.string()),
        ("pool", pa.string()),
        ("currency", pa.string()),
        ("debit", pa.decimal128(20, 2)),
        ("credit", pa.decimal128(20, 2)),
        ("tokens", pa.int64()),
        ("basis", pa.string()),
        # A line converted from another currency: the amount as priced (signed, debit > 0), its
        # currency, and the day's rate with its source; null when priced in the functional one.
        ("original_currency", pa.string()),
        ("original_amount", pa.decimal128(30, 12)),
        ("rate", pa.decimal128(20, 10)),
        ("rate_source", pa.string()),
    ]
)

NOT_A_DESTINATION = "{to!r} is not a destination: give a directory path or s3://bucket/prefix"
NOT_A_DIRECTORY = "{path} cannot hold the export: {why}"
NO_BUCKET = "s3://{bucket}: {why}"


class ExportError(Exception):
    """A destination that cannot take the export; nothing of the month was replaced."""


@dataclass(frozen=True)
class Written:
    dataset: str
    rows: int
    row_groups: int
    location: str


# --- destinations ------------------------------------------------------------------------------


class Destination:
    """Where the partitions go: `publish` moves a finished local file to a key under the root."""

    def scratch(self) -> str:
        """A directory for the files being written."""
        raise NotImplementedError

    def publish(self, *, local: Path, key: str) -> str:
        """Put `local` at `key` (replacing it), remove the partition's other files; the location."""
        raise NotImplementedError


class DirectoryDestination(Destination):
    def __init__(self, root: Path) -> None:
        self.root = root
        try:
            root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
                pass  # the directory takes new files
        except OSError as exc:
            raise ExportError(NOT_A_DIRECTORY.format(path=root, why=exc.strerror or exc)) from exc

    def scratch(self) -> str:
        return str(self.root)  # os.replace is atomic on one file system

    def publish(self, *, local: Path, key: str) -> str:
        target = self.root / key
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(local, target)
        for other in target.parent.iterdir():
            if other != target and other.is_file():
                other.unlink()
        return str(target)


class BucketDestination(Destination):
    def __init__(self, bucket: str, prefix: str) -> None:
        import boto3
        from botocore.config import Config

        endpoint = getattr(settings, "WAREHOUSE_S3_ENDPOINT_URL", "") or None
        style = {"addressing_style": "path"} if endpoint else {}
        self.bucket, self.prefix = bucket, prefix
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, config=Config(s3=style, retries={"max_attempts": 3})
        )
        self._call(lambda: self.client.head_bucket(Bucket=bucket))

    def _call(self, action: Callable[[], Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return action()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            why = f"{error.get('Code', '?')} {error.get('Message') or ''}".strip()
            raise ExportError(NO_BUCKET.format(bucket=self.bucket, why=why)) from exc
        except BotoCoreError as exc:
            raise ExportError(NO_BUCKET.format(bucket=self.bucket, why=exc)) from exc

    def scratch(self) -> str:
        return tempfile.gettempdir()

    def publish(self, *, local: Path, key: str) -> str:
        full = f"{self.prefix}/{key}" if self.prefix else key
        try:  # a managed upload: multipart for a large file
            self._call(lambda: self.client.upload_file(str(local), self.bucket, full))
        finally:
            local.unlink()
        folder = full.rsplit("/", 1)[0] + "/"
        pages = self._call(
            lambda: list(self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=folder))
        )
        stale = [{"Key": o["Key"]} for page in pages for o in page.get("Contents", []) if o["Key"] != full]
        for i in range(0, len(stale), 1000):  # DeleteObjects takes 1000 keys at most
            delete = {"Objects": stale[i : i + 1000]}
            self._call(partial(self.client.delete_objects, Bucket=self.bucket, Delete=delete))
        return f"s3://{self.bucket}/{full}"


def destination_of(to: str) -> Destination:
    """A directory path, or s3://bucket[/prefix]; ExportError when it is neither or unusable."""
    if to.startswith("s3://"):
        bucket, _, prefix = to.removeprefix("s3://").partition("/")
        if not bucket:
            raise ExportError(NOT_A_DESTINATION.format(to=to))
        return BucketDestination(bucket, prefix.strip("/"))
    if not to or "://" in to:
        raise ExportError(NOT_A_DESTINATION.format(to=to))
    return DirectoryDestination(Path(to))


# --- the export --------------------------------------------------------------------------------


def month_export(*, month: date, to: str, batch_rows: int = BATCH_ROWS) -> list[Written]:
    """Write the month's rollups and journal lines to `to` (see the module docstring)."""
    month = month_of(month)
    destination = destination_of(to)
    partition = f"month={month:%Y-%m}"
    written = []
    with _snapshot():
        window = month_window(month)
        datasets = (
            ("rollups", ROLLUPS, _rollup_pages(window, batch_rows)),
            ("journal", JOURNAL, _journal_pages(month, batch_rows)),
        )
        for name, schema, pages in datasets:
            local, rows, groups = _write(schema.with_metadata(_metadata(window)), pages, destination.scratch())
            location = destination.publish(local=local, key=f"{name}/{partition}/{PART}")
            written.append(Written(name, rows, groups, location))
    return written


@contextmanager
def _snapshot() -> Iterator[None]:
    """One read-only snapshot for both files (when not already inside a transaction)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _metadata(window: MonthWindow) -> dict[str, str]:
    return {
        "costplatform.month": f"{window.month:%Y-%m}",
        "costplatform.zone": window.zone.key,
        "costplatform.window_start": window.start.isoformat(),
        "costplatform.window_end": window.end.isoformat(),
    }


def _write(schema: pa.Schema, pages: Iterator[dict[str, list[Any]]], scratch: str) -> tuple[Path, int, int]:
    """The pages as row groups of one file in `scratch`: (its path, rows, row groups)."""
    handle, name = tempfile.mkstemp(dir=scratch, prefix=".export-", suffix=".parquet")
    os.close(handle)
    rows = groups = 0
    try:
        with pq.ParquetWriter(name, schema, compression=COMPRESSION) as writer:
            for page in pages:
                table = pa.Table.from_pydict(page, schema=schema)
                writer.write_table(table, row_group_size=table.num_rows)
                rows, groups = rows + table.num_rows, groups + 1
    except BaseException:
        os.unlink(name)
        raise
    return Path(name), rows, groups


# --- rollups -----------------------------------------------------------------------------------

_KEY = ("hour", "source_id", "model_id", "dims_id", "reason_id", "component")
_ROLLUP_SQL = """
SELECT hc.hour, hc.source_id, hc.model_id, hc.dims_id, hc.reason_id, hc.component,
       GREATEST(%(first)s, LEAST(%(last)s, (hc.hour AT TIME ZONE %(zone)s)::date)),
       k.name, m.name, m.version, r.name, hc.tokens, hc.cost, hc.currency, hc.price_version_id, p.name
FROM {costs} hc
JOIN {keys} k ON k.id = hc.source_id
JOIN {models} m ON m.id = hc.model_id
JOIN {reasons} r ON r.id = hc.reason_id
LEFT JOIN {pools} p ON p.id = hc.pool_id
WHERE hc.hour >= %(start)s AND hc.hour < %(end)s
  AND ({key}) > (%(hour)s, %(source_id)s, %(model_id)s, %(dims_id)s, %(reason_id)s, %(component)s)
ORDER BY {key}
LIMIT %(limit)s
"""


def _rollup_sql() -> str:
    tables: dict[str, type[models.Model]] = {
        "costs": HourlyCost,
        "keys": CollectorKey,
        "models": ServedModel,
        "reasons": Reason,
        "pools": CostPool,
    }
    names = {alias: connection.ops.quote_name(model._meta.db_table) for alias, model in tables.items()}
    return _ROLLUP_SQL.format(key=", ".join(f"hc.{c}" for c in _KEY), **names)


def _rollup_pages(window: MonthWindow, batch_rows: int) -> Iterator[dict[str, list[Any]]]:
    """Keyset pages on the rows' unique key (its index orders them): no offset, no cursor held
    between pages, and the same order on every run."""
    days = month_days(window.month)
    params: dict[str, Any] = {
        "first": days[0],
        "last": days[-1],
        "zone": window.zone.key,
        "start": window.start,
        "end": window.end,
        "limit": batch_rows,
    }
    # Below every key: the hours start at the window, ids and components are not negative.
    params.update(zip(_KEY, (window.start - timedelta(seconds=1), -1, -1, -1, -1, -1), strict=True))
    sql = _rollup_sql()
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not rows:
            return
        yield _rollup_columns(rows)
        params.update(zip(_KEY, rows[-1][:6], strict=True))


def _rollup_columns(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    dims = {d.pk: d for d in DimSet.objects.filter(pk__in={r[3] for r in rows}).only("id", "dims", "business_line")}
    return {
        "hour": [r[0] for r in rows],
        "day": [r[6] for r in rows],
        "source": [r[7] for r in rows],
        "model": [r[8] for r in rows],
        "model_version": [r[9] for r in rows],
        "business_line": [dims[r[3]].business_line for r in rows],
        "dims": [_json(dims[r[3]].dims) for r in rows],
        "reason": [r[10] for r in rows],
        "token_class": [r[10].split(".", 1)[0] for r in rows],
        "component": [COMPONENTS[r[5]] for r in rows],
        "tokens": [r[11] for r in rows],
        "cost": [r[12] for r in rows],
        "currency": [r[13] for r in rows],
        "price_version_id": [r[14] for r in rows],
        "pool": [r[15] for r in rows],
    }


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# --- journal -----------------------------------------------------------------------------------


def _journal_pages(month: date, batch_rows: int) -> Iterator[dict[str, list[Any]]]:
    """The lines posted in the month (adjustments of closed months included), keyset on id."""
    lines = JournalLine.objects.filter(period_id=month).select_related("entry", "account", "model", "pool")
    after = 0
    while True:
        page = list(lines.filter(pk__gt=after).order_by("pk")[:batch_rows])
        if not page:
            return
        yield _journal_columns(page)
        after = page[-1].pk


def _journal_columns(page: list[JournalLine]) -> dict[str, list[Any]]:
    return {
        "line_id": [ln.pk for ln in page],
        "entry_id": [ln.entry_id for ln in page],
        "entry_kind": [ln.entry.kind for ln in page],
        "period": [ln.period_id for ln in page],
        "day": [ln.day for ln in page],
        "adjusts": [ln.entry.adjusts for ln in page],
        "account_code": [ln.account.code for ln in page],
        "account_name": [ln.account.name for ln in page],
        "account_kind": [ln.account.kind for ln in page],
        "cost_centre": [ln.cost_centre for ln in page],
        "model": [ln.model.name if ln.model else None for ln in page],
        "model_version": [ln.model.version if ln.model else None for ln in page],
        "pool": [ln.pool.name if ln.pool else None for ln in page],
        "currency": [ln.currency for ln in page],
        "debit": [ln.debit for ln in page],
        "credit": [ln.credit for ln in page],
        "tokens": [ln.tokens for ln in page],
        "basis": [_json(ln.basis) for ln in page],
        "original_currency": [ln.original_currency for ln in page],
        "original_amount": [ln.original_amount for ln in page],
        "rate": [ln.rate for ln in page],
        "rate_source": [ln.rate_source for ln in page],
    }
