"""Writes of the ingest app: store a batch of validated records exactly once."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Generic, TypeVar

import msgspec
from django.conf import settings
from django.db import connection, transaction
from psycopg.errors import UniqueViolation

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_seen
from apps.common.buckets import hour_floor_sql, hour_origin, utc_buckets
from apps.common.composed import SQL, Composable, Composed, Identifier, Literal, col, commas, names, table, text
from apps.common.db import bound_cursor
from apps.common.gcpause import gc_paused
from apps.common.hourgrid import grid_check
from apps.common.rollup import Rollup
from apps.ingest.contract import BodyError, KeyLimits, RecordV1, Rejected, decode_batch
from apps.ingest.metrics import ingest_counted
from apps.ingest.models import DimSet, HourlyUsage, Record, Rejection, ServedModel
from apps.ingest.partitions import month_start, partitions_ensure
from apps.ingest.ratelimit import body_cost
from apps.ingest.retention import ingest_max_age
from wire.contract import ENDPOINTS, FINISH_REASONS, QUALITY_TIERS, STATUSES, TIMING_FIELDS, TOKEN_FIELDS

ENDPOINT_CODES = {name: code for code, name in enumerate(ENDPOINTS, start=1)}
STATUS_CODES = {name: code for code, name in enumerate(STATUSES)}
FINISH_CODES = {name: code for code, name in enumerate(FINISH_REASONS, start=1)}
TIER_CODES = {name: code for code, name in enumerate(QUALITY_TIERS, start=1)}
# Of a body that is not a batch, this much is kept in the dead-letter table.
RAW_BODY_KEPT = 64 * 1024

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
_COLUMN_NAMES = tuple(name for name, _ in RECORD_COLUMNS)
# The staging table has one more column: the id of the record's rollup dims (the rollups' key).
ROLLUP_DIMS = "rollup_id"
_STAGE_TYPES = [*(kind for _, kind in RECORD_COLUMNS), "int4"]
_VARIABLE_TYPES = {"text", "bytea"}
# The hourly usage rollup, summed from the inserted records.
USAGE = Rollup(
    table=HourlyUsage._meta.db_table,
    key=("hour", "source_id", "model_id", "dims_id", "endpoint", "status"),
    measures=("records", *TOKEN_FIELDS),
)

_RECORD = Record._meta.db_table
_STAGE = f"{_RECORD}_stage"
_INSERTED = ("ts", "record_key", "source_id", "model_id", "dims_id", "endpoint", "status", *TOKEN_FIELDS, ROLLUP_DIMS)
# Insert what is new and add exactly those rows to the hourly usage rollup, in one statement.
# Rollup rows are upserted in key order so concurrent batches lock them in the same order. A
# companion (below) appends its CTEs after ingest's own; the final SELECT reads `agg`.
#
# Most batches hold no record stored before: they are inserted as they are (_INSERT_NEW_HEAD),
# and the rollups read the staging table itself. A record stored before fails that statement
# (a unique violation, rolled back to its savepoint: _insert) and the batch is inserted again
# with ON CONFLICT DO NOTHING, the rollups reading the staged rows it RETURNs (_INSERT_HEAD). Without
# ON CONFLICT and RETURNING, PostgreSQL spends 12 to 14% less CPU a record (docs/benchmarks.md);
# a batch sent again costs the failed attempt, which stops at its first stored record.
_INSERT_HEAD = SQL("""
WITH stored AS (
    INSERT INTO {record} ({columns})
    SELECT {columns} FROM {stage}
    ON CONFLICT DO NOTHING
    RETURNING ts, source_id, record_key, record_id
), ins AS (
    SELECT {inserted} FROM {stage} s WHERE {new}
)""")
_INSERT_NEW_HEAD = SQL("""
WITH stored AS (
    INSERT INTO {record} ({columns})
    SELECT {columns} FROM {stage}
), ins AS (
    SELECT {inserted} FROM {stage}
)""")
_ROLLUP = SQL(""", agg AS (
    SELECT {hour} AS hour, ins.source_id, ins.model_id, ins.rollup_id AS dims_id,
           ins.endpoint, ins.status, count(*) AS records, {tokens}
    FROM ins
    GROUP BY 1, 2, 3, 4, 5, 6
), up AS (
    {upsert}
)""")


def _rollup() -> Composed:
    """The usage rollup's part of the statement, in the hour buckets of the accounting zone."""
    return _ROLLUP.format(
        hour=SQL(hour_floor_sql("ins.ts")),
        tokens=commas(SQL("sum({})").format(col("ins", name)) for name in TOKEN_FIELDS),
        upsert=USAGE.upsert(Identifier("agg")),
    )


_INSERT_TAIL = SQL("""
SELECT coalesce(sum(records), 0)::bigint FROM agg
""")


@dataclass(frozen=True)
class Prepared:
    """What a companion computed for a batch before its transaction: per record the values of
    its staging columns, the parameters of its CTEs, what it does first in the batch's
    transaction (before any lock of ingest's: the locks it takes there come first) and what it
    writes after the statement (in the transaction, so it commits or rolls back with the records)."""

    values: Sequence[tuple]
    params: Sequence[Any]
    after: Callable[[], None] | None = None
    before: Callable[[], None] | None = None


@dataclass(frozen=True)
class StageColumn:
    """A column a companion adds to the staging table: its name and PostgreSQL binary type."""

    name: str
    kind: str


@dataclass(frozen=True)
class BatchRows:
    """What a companion's CTEs may read of the statement that stores a batch: the staging table
    `table` (ingest_record's columns, `rollup_dims` the id of each record's rollup dim set, and
    the companion's own columns), of whose rows those for which `inserted(alias)` holds were
    inserted (a record stored before is not)."""

    table: Identifier
    rollup_dims: str
    all_new: bool

    def inserted(self, alias: str) -> Composable:
        """The condition true of the inserted rows of the staging table, named `alias`."""
        if self.all_new:
            return SQL("true")
        row = commas(col(alias, name) for name in ("ts", "source_id", "record_key", "record_id"))
        return SQL("({}) IN (SELECT ts, source_id, record_key, record_id FROM stored)").format(row)


@dataclass(frozen=True)
class Cte:
    """A named statement of a companion's part: `name AS (body)`, after ingest's own."""

    name: str
    body: Composable

    def composed(self) -> Composed:
        return SQL(", {} AS (\n{}\n)").format(Identifier(self.name), self.body)


@dataclass(frozen=True)
class Companion:
    """A later stage that writes its own rollup in the statement that stores a batch (for speed:
    one pass over the new rows, in the batch's transaction). Ingest knows it only by this
    shape; the stage owns it (apps.classification.ingest) and apps.pipeline hands it to
    `records_store`. Its staging `columns` are filled from `prepare`'s values; its `ctes`, given
    the batch's rows (BatchRows), read them and name their parameters %b, which `prepare` gives."""

    name: str  # the staging table's suffix: a companion's stage has its columns
    columns: tuple[StageColumn, ...]
    ctes: Callable[[BatchRows], Sequence[Cte]]
    prepare: Callable[[int, Sequence[RecordV1]], Prepared]  # (source id, records), before the transaction


@dataclass(frozen=True)
class _Statement:
    stage: str  # the staging table's name
    create: str
    truncate: str
    copy: str  # the batch's rows into the stage, binary COPY of `types`
    types: list[str]
    insert: str  # the batch with ON CONFLICT DO NOTHING
    insert_new: str  # the batch as it is: fails when a record was stored before


_statements: dict[tuple[str | None, timedelta], _Statement] = {}


def _statement(companion: Companion | None) -> _Statement:
    """The staging table and the insert statement of a companion (or of ingest alone), made once
    for each hour origin (the statement holds its zone's hour buckets). Before the first batch of
    an origin the stored hours are checked to lie on its grid (apps.common.hourgrid)."""
    key = (companion.name if companion else None, hour_origin())
    found = _statements.get(key)
    if found is not None:
        return found
    grid_check()
    extra = companion.columns if companion else ()
    # Stored with the variable-length columns last: the rollups read the fixed-width ones, which
    # PostgreSQL then finds at fixed offsets in each row.
    fixed = [name for name, kind in RECORD_COLUMNS if kind not in _VARIABLE_TYPES]
    variable = [name for name, kind in RECORD_COLUMNS if kind in _VARIABLE_TYPES]
    zero = [SQL("0::int4 AS {}").format(Identifier(ROLLUP_DIMS))]
    zero += [SQL("0::{} AS {}").format(SQL(c.kind), Identifier(c.name)) for c in extra]
    select = text(commas([names(fixed), *zero, names(variable)]))
    # The name carries a digest of the columns: a server connection that outlives an upgrade
    # (PgBouncer keeps them for an hour) keeps its stage of the old columns under the old name.
    shape = hashlib.blake2b(select.encode(), digest_size=4).hexdigest()
    stage = f"{_STAGE}_{companion.name}_{shape}" if companion else f"{_STAGE}_{shape}"
    table = Identifier(stage)
    create = SQL("CREATE TEMP TABLE IF NOT EXISTS {} AS SELECT {} FROM {} WITH NO DATA")
    columns = names([*_COLUMN_NAMES, ROLLUP_DIMS, *(c.name for c in extra)])

    def insert(head: SQL, all_new: bool) -> str:
        rows = BatchRows(table, ROLLUP_DIMS, all_new)
        ctes = [cte.composed() for cte in companion.ctes(rows)] if companion else []
        own = head.format(
            record=Identifier(_RECORD),
            columns=names(_COLUMN_NAMES),
            stage=table,
            inserted=names(_INSERTED),
            new=rows.inserted("s"),
        )
        return text(Composed([own, _rollup(), *ctes, _INSERT_TAIL]))

    types = [*_STAGE_TYPES, *(c.kind for c in extra)]
    found = _Statement(
        stage,
        text(create.format(table, SQL(select), Identifier(_RECORD))),
        text(SQL("TRUNCATE {}").format(table)),
        text(SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(table, columns)),
        types,
        insert(_INSERT_HEAD, False),
        insert(_INSERT_NEW_HEAD, True),
    )
    _statements[key] = found
    return found


def staging_table(companion: Companion | None = None) -> str:
    """The name of the session's temporary staging table of ingest (with `companion`)."""
    return _statement(companion).stage


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


# How json.dumps writes a str (ensure_ascii, in C): a dims key's digest is of the key as
# json.dumps(key, separators=(",", ":")) writes it, built here without the encoder's per-call setup.
_json_str = json.encoder.encode_basestring_ascii
# New dim sets go to PostgreSQL as JSON text (not the digest's form).
_json_encode = msgspec.json.Encoder().encode


def dims_digest(key: DimsKey) -> bytes:
    """The 128-bit digest of a dims key: of its compact JSON, [["key","value"],...], as json.dumps
    writes it (ASCII, escaped). msgspec writes the same bytes unless the key holds non-ASCII, DEL or
    a control character other than the five with short escapes: then it is written as json does."""
    text = _json_encode(key)
    if not text.isascii() or b"\x7f" in text or b"\\u" in text:
        text = ("[" + ",".join([f"[{_json_str(name)},{_json_str(value)}]" for name, value in key]) + "]").encode()
    return hashlib.blake2b(text, digest_size=16).digest()


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
# A record's dims items in the order it sent them (its dims key unsorted) -> the ids of its set.
_sent_dims: _RefCache[tuple[tuple[str, str], ...], tuple[int, int]] = _RefCache()


def reference_caches_clear() -> None:
    """Forget every cached reference id (tests: another test's cleanup may remove the rows)."""
    for cache in (_models, _dimsets, _sent_dims):
        cache.ids.clear()


# Served models by (name, version), sent as two text arrays: the missing ones inserted, then all read.
_MODELS_INSERT = text(
    SQL("INSERT INTO {} (name, version) SELECT * FROM unnest(%b::text[], %b::text[]) ON CONFLICT DO NOTHING").format(
        table(ServedModel)
    )
)
_MODELS_FIND = text(
    SQL(
        "SELECT s.name, s.version, s.id FROM {} s "
        "JOIN unnest(%b::text[], %b::text[]) AS k(name, version) USING (name, version)"
    ).format(table(ServedModel))
)


def served_models_resolve(*, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Ids of (model name, version) pairs, creating the missing ones."""
    ids = {key: _models.ids[key] for key in keys if key in _models.ids}
    missing = sorted(set(keys) - ids.keys())
    if missing:
        model_names, versions = [k[0] for k in missing], [k[1] for k in missing]
        with bound_cursor() as cursor:
            cursor.execute(_MODELS_INSERT, [model_names, versions])
            cursor.execute(_MODELS_FIND, [model_names, versions])
            found = {(name, version): pk for name, version, pk in cursor.fetchall()}
        ids.update(found)
        _models.remember(found)
    return ids


def _rollup_part(key: DimsKey, kept: frozenset[str]) -> DimsKey:
    return tuple(item for item in key if item[0] in kept)


# A batch's digests go as one bytea, cut back into digests server side (psycopg dumps an array
# parameter element by element, in Python).
_DIGEST_SIZE = 16
_DIGESTS = SQL(
    "SELECT substring(%b::bytea FROM {size} * (n - 1) + 1 FOR {size}) FROM generate_series(1, %b::int) AS n"
).format(size=Literal(_DIGEST_SIZE))
# New sets: their digests as above, and [dims, rollup id] pairs as one JSON array; the business
# line is read from the dims.
_DIMSETS_INSERT = text(
    SQL("""
INSERT INTO {dims} (digest, dims, business_line, rollup_id)
SELECT substring(%b::bytea FROM {size} * (p.n::int - 1) + 1 FOR {size}), p.pair -> 0,
       coalesce(p.pair -> 0 ->> 'business_line', ''), (p.pair ->> 1)::int
FROM jsonb_array_elements(%b::text::jsonb) WITH ORDINALITY AS p(pair, n)
ON CONFLICT (digest) DO NOTHING RETURNING digest, id
""").format(dims=table(DimSet), size=Literal(_DIGEST_SIZE))
)
# The ids of the dim sets of a batch's digests (sent as above).
_DIMSET_IDS = text(SQL("SELECT digest, id FROM {} WHERE digest = ANY(ARRAY({}))").format(table(DimSet), _DIGESTS))


def _dimset_ids(digests: dict[DimsKey, bytes]) -> dict[DimsKey, int]:
    """Ids of the dim sets with these digests that exist (committed)."""
    with bound_cursor() as cursor:
        cursor.execute(_DIMSET_IDS, [b"".join(digests.values()), len(digests)])
        by_digest = {bytes(digest): pk for digest, pk in cursor.fetchall()}
    return {key: by_digest[digest] for key, digest in digests.items() if digest in by_digest}


def _dimsets_create(
    keys: list[DimsKey], digests: dict[DimsKey, bytes], rollup_ids: dict[DimsKey, int | None]
) -> dict[DimsKey, int]:
    pairs = _json_encode([[dict(k), rollup_ids.get(k)] for k in keys]).decode()
    with bound_cursor() as cursor:
        cursor.execute(_DIMSETS_INSERT, [b"".join(digests[k] for k in keys), pairs])
        made = {bytes(digest): pk for digest, pk in cursor.fetchall()}
    found = {k: made[digests[k]] for k in keys if digests[k] in made}
    # Those another request created meanwhile are committed: a new statement sees them.
    others = {k: digests[k] for k in keys if k not in found}
    return found | _dimset_ids(others) if others else found


def dimsets_resolve(*, keys: Iterable[DimsKey]) -> dict[DimsKey, tuple[int, int]]:
    """For each dims set: (its id, the id of its rollup part), creating missing rows."""
    keys = set(keys)
    cached = _dimsets.ids
    result = {key: cached[key] for key in keys if key in cached}
    missing = keys - result.keys()
    if not missing:
        return result
    kept = frozenset(settings.ROLLUP_DIMS)
    parts = {key: _rollup_part(key, kept) for key in missing}
    part_keys = set(parts.values())
    # A rollup part is mostly known (many sets share one): only the others are digested and looked up.
    known = {part: cached[part][0] for part in part_keys if part in cached}
    digests = {key: dims_digest(key) for key in missing | (part_keys - known.keys())}
    # Most sets not in this process's cache exist already (made by another worker): look first.
    ids = _dimset_ids(digests) | known
    # Rollup parts first: a full set points at its part; a part is its own rollup (NULL).
    new_parts = sorted(part_keys - ids.keys())
    if new_parts:
        ids |= _dimsets_create(new_parts, digests, {})
    new_full = sorted(key for key in missing if key not in ids and parts[key] != key)
    if new_full:
        ids |= _dimsets_create(new_full, digests, {k: ids[parts[k]] for k in new_full})
    found = {k: (ids[k], ids[k]) for k in part_keys}
    found |= {k: (ids[k], ids[parts[k]]) for k in missing}
    _dimsets.remember(found)
    result.update({key: found[key] for key in missing})
    return result


@dataclass(frozen=True)
class RecordRows:
    """What records_store writes for a batch: the staging tuples (ingest_record's columns in
    RECORD_COLUMNS order, then the id of the record's rollup dims) and the months (UTC) they fall in."""

    rows: list[tuple]
    months: set[date]


def records_dims_ids(records: Sequence[RecordV1]) -> list[tuple[int, int]]:
    """Per record, (its dim set's id, the id of the set's rollup part), creating missing sets.

    The records of a batch the fast decoder read share one dims dict per distinct dims text
    (contract._dims_shared): each dict is looked up once, as the items it holds in the order
    they were sent (a source mostly sends a set the same way), and only the sets never seen are
    sorted into their DimsKey and resolved."""
    dicts = {id(r.dims): r.dims for r in records}
    known = _sent_dims.ids
    items_of = {at: tuple(dims.items()) for at, dims in dicts.items()}
    ids = {at: known.get(items) for at, items in items_of.items()}
    missing = {items: tuple(sorted(items)) for at, items in items_of.items() if ids[at] is None}
    if missing:
        resolved = dimsets_resolve(keys=set(missing.values()))
        found = {items: resolved[key] for items, key in missing.items()}
        _sent_dims.remember(found)
        ids = {at: pair or found[items_of[at]] for at, pair in ids.items()}
    return [ids[id(r.dims)] for r in records]  # type: ignore[misc]


def records_rows(*, source_id: int, records: Sequence[RecordV1]) -> RecordRows:
    """Resolve the records' model and dim set ids (creating missing ones, which commit on
    their own) and build their ingest_record rows."""
    model_ids = served_models_resolve(keys={(r.model, r.model_version or "") for r in records})
    rows = _rows(source_id, records, records_dims_ids(records), model_ids)
    return RecordRows(rows=rows, months=utc_buckets([r.ts for r in records], month_start))


def _rows(
    source_id: int,
    records: Sequence[RecordV1],
    dims_ids: list[tuple[int, int]],
    model_ids: dict[tuple[str, str], int],
) -> list[tuple]:
    # The hot loop of ingest (one pass a record): names bound locally, record_key inlined.
    blake2b, from_bytes, fromhex = hashlib.blake2b, int.from_bytes, bytes.fromhex
    endpoints, statuses, finishes, tiers = ENDPOINT_CODES, STATUS_CODES, FINISH_CODES, TIER_CODES
    rows: list[tuple] = []
    append = rows.append
    for r, (dims_id, rollup_id) in zip(records, dims_ids, strict=True):
        t, o, tm = r.tokens, r.outcome, r.timing
        if tm is None:
            queued = ttft = prefill = decode = e2e = None
        else:
            queued, ttft, prefill, decode, e2e = tm.queued, tm.ttft, tm.prefill, tm.decode, tm.e2e
        rid, endpoint, finish, tier, phash = r.record_id, r.endpoint, o.finish_reason, r.quality_tier, r.prompt_hash
        append(
            (
                r.ts,  # timestamptz: the instant is dumped, whatever the offset it came with
                from_bytes(blake2b(rid.encode(), digest_size=8).digest(), "big", signed=True),  # record_key()
                source_id,
                model_ids[(r.model, r.model_version or "")],
                dims_id,
                # TOKEN_FIELDS, in their order (RECORD_COLUMNS)
                t.prompt, t.completion, t.prompt_cached, t.system, t.tool,
                t.structural, t.padding, t.draft, t.draft_accepted, t.recomputed, t.reasoning,
                t.prompt_cache_write,
                queued, ttft, prefill, decode, e2e,
                endpoints.get(endpoint) if endpoint else None,
                statuses[o.status],
                finishes[finish] if finish else None,
                tiers[tier] if tier else None,
                r.attempt,
                rid,
                r.retry_of,
                fromhex(phash) if phash else None,
                rollup_id,
            )
        )  # fmt: skip
    return rows


def records_store(*, source_id: int, records: Sequence[RecordV1], companion: Companion | None = None) -> StoreResult:
    """Store validated records exactly once and add the new ones to the hourly usage rollup (and,
    with a companion, to its own rollup in the same statement).

    A record already stored (same source, record_id and ts) is counted as a duplicate and
    changes nothing, also when two requests carry it at the same moment: the second insert
    waits for the first and then skips it. `records` must hold no repeats (decode_batch).
    """
    if not records:
        return StoreResult(accepted=0, duplicates=0)
    # Reference rows commit on their own, before the batch transaction takes any lock.
    built = records_rows(source_id=source_id, records=records)
    statement = _statement(companion)
    prepared = companion.prepare(source_id, records) if companion else None
    with transaction.atomic(), connection.cursor() as cursor:
        if prepared is not None and prepared.before is not None:
            prepared.before()
        partitions_ensure(built.months)
        cursor.execute(statement.create)
        cursor.execute(statement.truncate)
        with cursor.cursor.copy(statement.copy) as copy:
            copy.set_types(statement.types)
            write = copy.write_row
            if prepared is None:
                for row in built.rows:
                    write(row)
            else:
                for row, extra in zip(built.rows, prepared.values, strict=True):
                    write(row + extra)
        params = list(prepared.params) if prepared else []
        accepted = _insert(statement, params)
        if prepared is not None and prepared.after is not None:
            prepared.after()
    return StoreResult(accepted=accepted, duplicates=len(records) - accepted)


def _insert(statement: _Statement, params: list[Any]) -> int:
    """Insert the staged batch and add it to the rollups; the number of records inserted."""
    with bound_cursor() as bound:
        try:
            with transaction.atomic():  # a savepoint: the failed attempt leaves nothing behind
                return _count(bound, statement.insert_new, params)
        except UniqueViolation:
            pass  # a record of the batch is stored already: insert only what is new
        return _count(bound, statement.insert, params)


def _count(cursor: Any, sql: str, params: list[Any]) -> int:
    cursor.execute(sql, params)
    (count,) = cursor.fetchone()
    return int(count)


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
    """Keep a body that could not be read as a batch at all: its first RAW_BODY_KEPT bytes,
    enough to see what a sender got wrong, with the whole size in the error."""
    if len(body) > RAW_BODY_KEPT:
        error = f"{error} (body of {len(body)} bytes; its first {RAW_BODY_KEPT} are kept)"
    Rejection.objects.create(
        source_id=source_id,
        index=None,
        raw=_pg_text(body[:RAW_BODY_KEPT].decode("utf-8", errors="replace")),
        errors={"body": [_pg_text(error)]},
    )


def body_refuse(*, source_id: int, body: bytes, error: str, admit: Callable[[int], None] | None = None) -> None:
    """A body that is not a batch (not UTF-8, not JSON, broken gzip, ...): charged to the key's
    rate limit first, as many records as its size could have held, so a flood of garbage is
    throttled like a flood of records; then kept. What `admit` raises leaves nothing stored."""
    if admit is not None:
        admit(body_cost(len(body)))
    body_rejection_save(source_id=source_id, body=body, error=error)


def key_limits(key: CollectorKey) -> KeyLimits:
    """What the key may write, from the row its request authenticated with (no query)."""
    backdate = None if key.backfill else timedelta(days=key.backdate_days)
    return KeyLimits(
        key=key.name,
        business_lines=frozenset(key.business_lines),
        reconciliation=key.reconciliation,
        backdate=backdate,
    )


@dataclass(frozen=True)
class IngestResult:
    accepted: int
    duplicates: int
    rejected: list[Rejected]


def batch_ingest(
    *,
    key: CollectorKey,
    body: bytes,
    ndjson: bool,
    admit: Callable[[int], None] | None = None,
    companion: Companion | None = None,
) -> IngestResult:
    """Decode, validate and store one request body sent with `key`. Invalid records, and those
    beyond the key's limits (business lines, reconciliation, age), are kept in the dead-letter
    table; the valid ones are stored even when others are refused.

    Raises BodyError (kept too) when the body is not a batch, TooManyRecords over the limit.
    `admit(count)` is called with the batch's record count (or an unreadable body's cost)
    before anything is written; what it raises (a rate limit) leaves nothing stored. A
    `companion` writes its rollup in the statement that stores the records (records_store).
    """
    with gc_paused():
        return _batch_ingest(key=key, body=body, ndjson=ndjson, admit=admit, companion=companion)


def _batch_ingest(
    *,
    key: CollectorKey,
    body: bytes,
    ndjson: bool,
    admit: Callable[[int], None] | None,
    companion: Companion | None,
) -> IngestResult:
    started = time.perf_counter()
    source_id = key.pk
    collector_key_seen(key=key)
    try:
        batch = decode_batch(
            body,
            ndjson=ndjson,
            max_records=settings.INGEST_MAX_RECORDS,
            max_age=ingest_max_age(now=datetime.now(UTC)),
            limits=key_limits(key),
        )
    except BodyError as exc:
        body_refuse(source_id=source_id, body=body, error=str(exc), admit=admit)
        raise
    if admit is not None:
        admit(len(batch.records) + len(batch.rejected) + batch.duplicates)
    if batch.rejected:
        rejections_save(source_id=source_id, rejected=batch.rejected)
    stored = records_store(source_id=source_id, records=batch.records, companion=companion)
    duplicates = stored.duplicates + batch.duplicates
    ingest_counted(
        accepted=stored.accepted,
        duplicates=duplicates,
        rejected=len(batch.rejected),
        seconds=time.perf_counter() - started,
    )
    return IngestResult(accepted=stored.accepted, duplicates=duplicates, rejected=batch.rejected)
