"""Writes of the ingest app: store a batch of validated records exactly once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, timedelta
from typing import Generic, TypeVar

from django.conf import settings
from django.db import connection, transaction

from apps.ingest.contract import (
    ENDPOINTS,
    FINISH_REASONS,
    QUALITY_TIERS,
    STATUSES,
    BodyError,
    RecordV1,
    Rejected,
    decode_batch,
)
from apps.ingest.models import TIMING_FIELDS, TOKEN_FIELDS, Rejection
from apps.ingest.partitions import partitions_ensure

ENDPOINT_CODES = {name: code for code, name in enumerate(ENDPOINTS, start=1)}
STATUS_CODES = {name: code for code, name in enumerate(STATUSES)}
FINISH_CODES = {name: code for code, name in enumerate(FINISH_REASONS, start=1)}
TIER_CODES = {name: code for code, name in enumerate(QUALITY_TIERS, start=1)}

# Column order of ingest_record as written by COPY (8-byte, then 4-, 2-byte, then variable).
RECORD_COLUMNS = (
    ("ts", "timestamptz"),
    ("record_key", "int8"),
    ("source_id", "int4"),
    ("model_id", "int4"),
    ("dims_id", "int4"),
    *((name, "int4") for name in TOKEN_FIELDS),
    *((name, "int4") for name in TIMING_FIELDS),
    ("endpoint", "int2"),
    ("status", "int2"),
    ("finish_reason", "int2"),
    ("quality_tier", "int2"),
    ("attempt", "int2"),
    ("record_id", "text"),
    ("retry_of", "text"),
    ("prompt_hash", "bytea"),
)
_COLUMN_NAMES = ", ".join(name for name, _ in RECORD_COLUMNS)
_COLUMN_TYPES = [kind for _, kind in RECORD_COLUMNS]
_TOKEN_SUMS = ", ".join(f"sum(ins.{name})" for name in TOKEN_FIELDS)
_TOKEN_LIST = ", ".join(TOKEN_FIELDS)
_TOKEN_ADD = ", ".join(f"{name} = u.{name} + excluded.{name}" for name in TOKEN_FIELDS)
_ROLLUP_KEY = "hour, source_id, model_id, dims_id, endpoint, status"

_STAGE_SQL = f"""
CREATE TEMP TABLE IF NOT EXISTS ingest_record_stage AS SELECT {_COLUMN_NAMES} FROM ingest_record WITH NO DATA
"""
# Insert what is new, and add exactly those rows to the hourly rollups, in one statement.
# Rollup rows are upserted in key order so concurrent batches lock them in the same order.
_INSERT_SQL = f"""
WITH ins AS (
    INSERT INTO ingest_record ({_COLUMN_NAMES})
    SELECT {_COLUMN_NAMES} FROM ingest_record_stage
    ON CONFLICT DO NOTHING
    RETURNING ts, source_id, model_id, dims_id, endpoint, status, {_TOKEN_LIST}
), agg AS (
    SELECT date_trunc('hour', ins.ts, 'UTC') AS hour, ins.source_id, ins.model_id, m.rollup_id AS dims_id,
           ins.endpoint, ins.status, count(*) AS records, {_TOKEN_SUMS}
    FROM ins JOIN unnest(%s::int[], %s::int[]) AS m(dims_id, rollup_id) ON m.dims_id = ins.dims_id
    GROUP BY 1, 2, 3, 4, 5, 6
), up AS (
    INSERT INTO ingest_hourlyusage AS u ({_ROLLUP_KEY}, records, {_TOKEN_LIST})
    SELECT * FROM agg ORDER BY {_ROLLUP_KEY}
    ON CONFLICT ({_ROLLUP_KEY}) DO UPDATE SET records = u.records + excluded.records, {_TOKEN_ADD}
)
SELECT coalesce(sum(records), 0)::bigint FROM agg
"""

DimsKey = tuple[tuple[str, str], ...]
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class StoreResult:
    accepted: int
    duplicates: int


def record_key(record_id: str) -> int:
    """The 64-bit key that, with source and ts, identifies a stored record."""
    return int.from_bytes(hashlib.blake2b(record_id.encode(), digest_size=8).digest(), "big", signed=True)


def dims_digest(key: DimsKey) -> bytes:
    return hashlib.blake2b(json.dumps(key, separators=(",", ":")).encode(), digest_size=16).digest()


class _RefCache(Generic[K, V]):
    """Process-local map of reference rows (models, dim sets) to ids. Entries are added
    only after the transaction that made them visible commits; rows are never deleted."""

    def __init__(self, limit: int = 200_000) -> None:
        self.ids: dict[K, V] = {}
        self.limit = limit

    def remember(self, found: dict[K, V]) -> None:
        def store() -> None:
            if len(self.ids) > self.limit:
                self.ids.clear()
            self.ids.update(found)

        transaction.on_commit(store)


_models: _RefCache[tuple[str, str], int] = _RefCache()
_dimsets: _RefCache[DimsKey, tuple[int, int]] = _RefCache()


def served_models_resolve(*, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Ids of (model name, version) pairs, creating the missing ones."""
    ids = {key: _models.ids[key] for key in keys if key in _models.ids}
    missing = sorted(set(keys) - ids.keys())
    if missing:
        names, versions = [k[0] for k in missing], [k[1] for k in missing]
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO ingest_servedmodel (name, version) SELECT * FROM unnest(%s::text[], %s::text[]) "
                "ON CONFLICT DO NOTHING",
                [names, versions],
            )
            cursor.execute(
                "SELECT s.name, s.version, s.id FROM ingest_servedmodel s "
                "JOIN unnest(%s::text[], %s::text[]) AS k(name, version) USING (name, version)",
                [names, versions],
            )
            found = {(name, version): pk for name, version, pk in cursor.fetchall()}
        ids.update(found)
        _models.remember(found)
    return ids


def _rollup_part(key: DimsKey) -> DimsKey:
    kept = settings.ROLLUP_DIMS
    return tuple(item for item in key if item[0] in kept)


def _dimsets_create(keys: list[DimsKey], rollup_ids: dict[DimsKey, int | None]) -> dict[DimsKey, int]:
    digests = [dims_digest(k) for k in keys]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ingest_dimset (digest, dims, business_line, rollup_id) "
            "SELECT * FROM unnest(%s::bytea[], %s::jsonb[], %s::text[], %s::int[]) ON CONFLICT (digest) DO NOTHING",
            [
                digests,
                [json.dumps(dict(k)) for k in keys],
                [dict(k).get("business_line", "") for k in keys],
                [rollup_ids.get(k) for k in keys],
            ],
        )
        cursor.execute("SELECT digest, id FROM ingest_dimset WHERE digest = ANY(%s)", [digests])
        by_digest = {bytes(digest): pk for digest, pk in cursor.fetchall()}
    return {key: by_digest[digest] for key, digest in zip(keys, digests, strict=True)}


def dimsets_resolve(*, keys: Iterable[DimsKey]) -> dict[DimsKey, tuple[int, int]]:
    """For each dims set: (its id, the id of its rollup part), creating missing rows."""
    keys = set(keys)
    result = {key: _dimsets.ids[key] for key in keys if key in _dimsets.ids}
    missing = keys - result.keys()
    if not missing:
        return result
    parts = {key: _rollup_part(key) for key in missing}
    # Rollup parts first: a full set points at its part; a part is its own rollup (NULL).
    part_keys = sorted(set(parts.values()))
    part_ids = _dimsets_create(part_keys, {})
    full_keys = sorted(key for key in missing if parts[key] != key)
    full_ids = _dimsets_create(full_keys, {k: part_ids[parts[k]] for k in full_keys}) if full_keys else {}
    found = {k: (part_ids[k], part_ids[k]) for k in part_keys}
    found |= {k: (full_ids[k], part_ids[parts[k]]) for k in full_keys}
    _dimsets.remember(found)
    result.update({key: found[key] for key in missing})
    return result


def _timing(record: RecordV1) -> tuple[int | None, ...]:
    t = record.timing
    if t is None:
        return (None,) * len(TIMING_FIELDS)
    return (t.queued, t.ttft, t.prefill, t.decode, t.e2e)


def _rows(
    source_id: int, records: Sequence[RecordV1], model_ids: dict, dims_ids: dict
) -> tuple[list[tuple], set[date]]:
    rows = []
    months = set()
    for r in records:
        ts = r.ts.astimezone(UTC)
        months.add(date(ts.year, ts.month, 1))
        t = r.tokens
        rows.append(
            (
                ts,
                record_key(r.record_id),
                source_id,
                model_ids[(r.model, r.model_version or "")],
                dims_ids[tuple(sorted(r.dims.items()))][0],
                t.prompt, t.prompt_cached, t.completion, t.system, t.tool,
                t.structural, t.padding, t.draft, t.draft_accepted, t.recomputed,
                *_timing(r),
                ENDPOINT_CODES.get(r.endpoint) if r.endpoint else None,
                STATUS_CODES[r.outcome.status],
                FINISH_CODES[r.outcome.finish_reason] if r.outcome.finish_reason else None,
                TIER_CODES[r.quality_tier] if r.quality_tier else None,
                r.attempt,
                r.record_id,
                r.retry_of,
                bytes.fromhex(r.prompt_hash) if r.prompt_hash else None,
            )
        )  # fmt: skip
    return rows, months


def records_store(*, source_id: int, records: Sequence[RecordV1]) -> StoreResult:
    """Store validated records exactly once and add the new ones to the hourly rollups.

    A record already stored (same source, record_id and ts) is counted as a duplicate and
    changes nothing, also when two requests carry it at the same moment: the second insert
    waits for the first and then skips it. `records` must hold no repeats (decode_batch).
    """
    if not records:
        return StoreResult(accepted=0, duplicates=0)
    # Reference rows commit on their own, before the batch transaction takes any lock.
    model_ids = served_models_resolve(keys={(r.model, r.model_version or "") for r in records})
    dims_ids = dimsets_resolve(keys={tuple(sorted(r.dims.items())) for r in records})
    rows, months = _rows(source_id, records, model_ids, dims_ids)
    pairs = {ids for ids in dims_ids.values()}
    with transaction.atomic(), connection.cursor() as cursor:
        partitions_ensure(months)
        cursor.execute(_STAGE_SQL)
        cursor.execute("TRUNCATE ingest_record_stage")
        with cursor.cursor.copy(f"COPY ingest_record_stage ({_COLUMN_NAMES}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_COLUMN_TYPES)
            for row in rows:
                copy.write_row(row)
        cursor.execute(_INSERT_SQL, [[p[0] for p in pairs], [p[1] for p in pairs]])
        accepted = cursor.fetchone()[0]
    return StoreResult(accepted=accepted, duplicates=len(records) - accepted)


def _pg_text(text: str) -> str:
    # PostgreSQL text cannot hold NUL; keep the rest of the input as it came.
    return text.replace("\x00", "\ufffd")


def rejections_save(*, source_id: int, rejected: Sequence[Rejected]) -> None:
    """Keep refused records as received, with the reasons (the dead-letter table)."""
    Rejection.objects.bulk_create(
        Rejection(
            source_id=source_id,
            index=r.index,
            record_id=_pg_text(r.record_id),
            raw=_pg_text(r.raw),
            errors=json.loads(_pg_text(json.dumps(r.errors))),
        )
        for r in rejected
    )


def body_rejection_save(*, source_id: int, body: bytes, error: str) -> None:
    """Keep a body that could not be read as a batch at all."""
    Rejection.objects.create(
        source_id=source_id,
        index=None,
        raw=_pg_text(body.decode("utf-8", errors="replace")),
        errors={"body": [_pg_text(error)]},
    )


@dataclass(frozen=True)
class IngestResult:
    accepted: int
    duplicates: int
    rejected: list[Rejected]


def batch_ingest(*, source_id: int, body: bytes, ndjson: bool) -> IngestResult:
    """Decode, validate and store one request body. Invalid records are kept in the
    dead-letter table; the valid ones are stored even when others are refused.

    Raises BodyError (kept too) when the body is not a batch, TooManyRecords over the limit.
    """
    try:
        batch = decode_batch(
            body,
            ndjson=ndjson,
            max_records=settings.INGEST_MAX_RECORDS,
            max_age=timedelta(days=settings.INGEST_MAX_AGE_DAYS),
        )
    except BodyError as exc:
        body_rejection_save(source_id=source_id, body=body, error=str(exc))
        raise
    if batch.rejected:
        rejections_save(source_id=source_id, rejected=batch.rejected)
    stored = records_store(source_id=source_id, records=batch.records)
    return IngestResult(
        accepted=stored.accepted, duplicates=stored.duplicates + batch.duplicates, rejected=batch.rejected
    )
