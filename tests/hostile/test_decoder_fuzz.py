"""hypothesis against the record decoder (apps/ingest/contract.decode_batch) and the body reader
(apps/ingest/api/body.gunzip): arbitrary bytes, mutated valid batches and records with fields
replaced by arbitrary JSON never raise anything but the documented refusals (BodyError: 400,
TooManyRecords: 413; for gzip ParseError: 400, PayloadTooLarge: 413), every item of a readable
batch is accounted for (accepted, duplicate or rejected with a reason), and accepted records
round-trip. HOSTILE_EXAMPLES scales the examples (`make fuzz`)."""

from __future__ import annotations

import gzip
import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError

from apps.ingest.api.body import PayloadTooLarge, gunzip
from apps.ingest.contract import BodyError, DecodedBatch, RecordV1, TooManyRecords, decode_batch
from tests import factories

SCALE = max(1, int(os.environ.get("HOSTILE_EXAMPLES", "8")) // 8)
NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)
MAX_RECORDS = 20
fuzz = settings(max_examples=150 * SCALE, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def decode(body: bytes, *, ndjson: bool) -> DecodedBatch | None:
    """decode_batch, or None for a documented refusal of the whole body."""
    try:
        return decode_batch(body, ndjson=ndjson, max_records=MAX_RECORDS, max_age=timedelta(days=30), now=NOW)
    except BodyError as exc:
        assert str(exc)
        return None
    except TooManyRecords as exc:
        assert f"at most {MAX_RECORDS}" in str(exc)
        return None


def valid_record(index: int) -> dict[str, Any]:
    return factories.record(record_id=f"r-{index}", ts=(NOW - timedelta(minutes=index)).isoformat())


def batch_body(records: list[Any], *, ndjson: bool) -> bytes:
    if ndjson:
        return b"\n".join(json.dumps(r).encode() for r in records)
    return json.dumps({"records": records}).encode()


def accounted(result: DecodedBatch, items: int) -> None:
    assert len(result.records) + len(result.rejected) + result.duplicates == items
    for rejected in result.rejected:
        assert 0 <= rejected.index < items
        assert rejected.errors and all(isinstance(m, str) for ms in rejected.errors.values() for m in ms)
    for record in result.records:
        assert msgspec.json.decode(msgspec.json.encode(record), type=RecordV1) == record


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
FIELDS = [
    "record_id", "ts", "model", "model_version", "endpoint", "dims", "dims.team", "tokens", "tokens.prompt",
    "tokens.prompt_cached", "tokens.completion", "tokens.draft_accepted", "outcome", "outcome.status",
    "outcome.finish_reason", "timing", "timing.e2e", "attempt", "retry_of", "prompt_hash", "quality_tier", "extra",
]  # fmt: skip


@fuzz
@given(body=st.binary(max_size=2000), ndjson=st.booleans())
@example(body=b"[" * 100_000, ndjson=False)
@example(body=b'{"records":' + b"[" * 100_000, ndjson=False)
@example(body=b'{"a":' * 50_000 + b"1" + b"}" * 50_000, ndjson=True)
@example(body="\ufeff{}".encode("utf-16"), ndjson=False)
@example(body=b"\xff\xfe{\x00}\x00", ndjson=True)
@example(body=b"1\n" * 10_000, ndjson=True)
def test_arbitrary_bytes_are_refused_or_accounted_for(body: bytes, ndjson: bool) -> None:
    result = decode(body, ndjson=ndjson)
    if result is not None:
        accounted(result, len(result.records) + len(result.rejected) + result.duplicates)


@fuzz
@given(
    count=st.integers(1, 5),
    ndjson=st.booleans(),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.binary(max_size=4)), min_size=1, max_size=4),
)
def test_mutated_valid_batches_are_refused_or_accounted_for(
    count: int, ndjson: bool, edits: list[tuple[int, int, bytes]]
) -> None:
    body = bytearray(batch_body([valid_record(i) for i in range(count)], ndjson=ndjson))
    for at, cut, insert in edits:
        at %= len(body) + 1
        body[at : at + cut] = insert
    result = decode(bytes(body), ndjson=ndjson)
    if result is not None:
        accounted(result, len(result.records) + len(result.rejected) + result.duplicates)


@fuzz
@given(
    replaced=st.lists(st.tuples(st.sampled_from(FIELDS), json_values), max_size=3),
    others=st.integers(0, 3),
    ndjson=st.booleans(),
)
def test_records_with_arbitrary_field_values_are_accepted_or_rejected_with_reasons(
    replaced: list[tuple[str, Any]], others: int, ndjson: bool
) -> None:
    hostile = valid_record(0)
    for dotted, value in replaced:
        *parents, leaf = dotted.split(".")
        target = hostile
        for part in parents:
            target = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target[leaf] = value
    neighbours = [valid_record(i) for i in range(1, others + 1)]
    records = [*neighbours, hostile]  # last: whatever its record_id, the neighbours come first

    result = decode(batch_body(records, ndjson=ndjson), ndjson=ndjson)

    assert result is not None  # every item is a JSON value: the batch is readable
    accounted(result, len(records))
    kept = [r.record_id for r in result.records]
    assert kept[:others] == [n["record_id"] for n in neighbours]  # never lost to a bad neighbour


@fuzz
@given(index=st.integers(0, 50), ndjson=st.booleans())
def test_a_valid_record_round_trips(index: int, ndjson: bool) -> None:
    sent = valid_record(index)

    result = decode(batch_body([sent], ndjson=ndjson), ndjson=ndjson)

    assert result is not None and not result.rejected
    (record,) = result.records
    back = msgspec.to_builtins(record)
    back["ts"] = datetime.fromisoformat(back["ts"].replace("Z", "+00:00")).isoformat()
    assert back == {k: v for k, v in sent.items() if v is not None}


@fuzz
@given(data=st.binary(max_size=3000), members=st.integers(1, 3), cut=st.integers(0, 40), compressed=st.booleans())
def test_gzip_bodies_inflate_whole_or_are_refused(data: bytes, members: int, cut: int, compressed: bool) -> None:
    body = b"".join(gzip.compress(data) for _ in range(members)) if compressed else data
    body = body[: len(body) - cut] if cut else body
    try:
        inflated = gunzip(body, limit=4096)
    except (ParseError, PayloadTooLarge) as exc:
        assert str(exc.detail)
        assert not (compressed and not cut and len(data) * members <= 4096)
        return
    assert len(inflated) <= 4096
    if compressed and not cut:
        assert inflated == data * members


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(bytes(50_000_000), compresslevel=9)  # 50 MB of zeros in about 50 kB

    try:
        gunzip(bomb, limit=1_000_000)
    except PayloadTooLarge as exc:
        assert "1000000" in str(exc.detail)
    else:
        raise AssertionError("a gzip bomb was inflated")


def test_concatenated_gzip_members_are_all_read() -> None:
    first, second = b'{"records": [', b"]}"

    assert gunzip(gzip.compress(first) + gzip.compress(second), limit=100) == first + second
