"""The token record v1 as the platform takes it: decoding and validating a batch, and what a
collector key may write.

The record's types, fields and enumerations are wire's (wire/contract.py), shared with the edge
that builds the records; this module decodes batches into them. msgspec validates a whole batch
in one call (a few microseconds a record); only when that fails are the items decoded one by
one, to say which records are wrong and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import chain
from operator import attrgetter, methodcaller
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from wire.contract import (
    ENDPOINTS,
    FINISH_REASONS,
    MAX_COUNT,
    MAX_DIM_KEY,
    MAX_DIMS,
    QUALITY_TIERS,
    RECONCILIATION_DIM,
    RECONCILIATION_VALUE,
    STATUSES,
    DimKey,
    DimValue,
    RecordV1,
    Timing,
    Tokens,
    json_schema,
)

__all__ = [
    "ENDPOINTS",
    "FINISH_REASONS",
    "MAX_COUNT",
    "QUALITY_TIERS",
    "RECONCILIATION_DIM",
    "RECONCILIATION_VALUE",
    "STATUSES",
    "BodyError",
    "DecodedBatch",
    "KeyLimits",
    "RecordV1",
    "Rejected",
    "Timing",
    "Tokens",
    "TooManyRecords",
    "decode_batch",
    "json_schema",
    "limits_refused",
    "record_problems",
]

BUSINESS_LINE = "business_line"
# The dim names the key limits read, and what a name becomes folded (case, `-` for `_`): a
# record naming one in another spelling (`Business_Line`, `Costplatform.Kind`) from a limited
# key is refused, never passed by a check that compares names exactly.
LIMITED_DIMS = frozenset({BUSINESS_LINE, RECONCILIATION_DIM})


def _spelled_otherwise(keys: Any) -> list[str]:
    return [k for k in keys if k not in LIMITED_DIMS and k.lower().replace("-", "_") in LIMITED_DIMS]


# A record's dims as the fast path checks them once per distinct text: DimKey less its pattern.
_FastKey = Annotated[str, Meta(min_length=1, max_length=MAX_DIM_KEY)]
_FastDims = Annotated[dict[_FastKey, DimValue], Meta(max_length=MAX_DIMS)]
_decode_dims = msgspec.json.Decoder(_FastDims).decode


class _RecordV1Fast(RecordV1, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """RecordV1 with its dims left as JSON text and less the prompt hash pattern. Only the
    whole-batch fast path decodes into it: a batch holds few distinct dims texts (a source
    sends the same set the same way), so _dims_shared decodes and checks each one once (each
    distinct key against DimKey's pattern) and gives the records that sent it one dict, shared;
    _prompt_hashes_valid checks all the prompt hashes at once (msgspec would run the pattern's
    regex on each). The records are then made RecordV1 again."""

    dims: msgspec.Raw = msgspec.Raw(b"{}")  # type: ignore[assignment]
    prompt_hash: Annotated[str, Meta(min_length=16, max_length=128)] | None = None


class _BatchFast(msgspec.Struct, forbid_unknown_fields=True):
    records: list[_RecordV1Fast]


assert _RecordV1Fast.__struct_fields__ == RecordV1.__struct_fields__  # same fields, same layout
_decode_batch_fast = msgspec.json.Decoder(_BatchFast).decode
_decode_list_fast = msgspec.json.Decoder(list[_RecordV1Fast]).decode
# Dim keys that passed DimKey, so each is checked once per process (bounded: keys are free text).
_GOOD_DIM_KEYS: set[str] = set()
_GOOD_DIM_KEYS_LIMIT = 10_000


class _RawBatch(msgspec.Struct, forbid_unknown_fields=True):
    records: list[msgspec.Raw]


class BodyError(ValueError):
    """The body as a whole cannot be read as a batch of records."""


class TooManyRecords(ValueError):
    pass


# msgspec decodes nested arrays and objects recursively and stops at the interpreter's recursion
# limit with a RecursionError; a record nests four levels at most, so such a body is hostile.
TOO_DEEP = "JSON nests too deep (a record nests 4 levels at most)"
_NOT_UTF8 = "Body is not UTF-8 (byte {at}: {hint}); JSON must be sent as UTF-8"
_BOMS = (
    (b"\xef\xbb\xbf", "a UTF-8 byte-order mark"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
# A non-blank NDJSON line, as _split_ndjson keeps it (bytes.strip removes these six).
_NON_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*[^ \t\n\r\f\v]", re.M)


Errors = dict[str, list[str]]


@dataclass(frozen=True)
class Rejected:
    index: int
    record_id: str
    errors: Errors
    raw: str


@dataclass(frozen=True)
class KeyLimits:
    """What one collector key may write (accounts.CollectorKey): its business lines (empty =
    all), whether it may send reconciliation records, and how far back its records may be
    (None: a backfill key, held only to the platform's maximum age)."""

    key: str
    business_lines: frozenset[str] = frozenset()
    reconciliation: bool = False
    backdate: timedelta | None = timedelta(days=3)


@dataclass
class DecodedBatch:
    records: list[RecordV1] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    duplicates: int = 0


_ERROR_AT = re.compile(r"^(?P<message>.*?)(?: - at (?P<key>`key` in )?`(?P<path>[^`]*)`)?$", re.S)
_FIELD_IN_MESSAGE = re.compile(r"^Object (?:contains unknown|missing required) field `(?P<name>[^`]+)`")


def error_field(message: str) -> Errors:
    """Turn a msgspec message ("Expected `int` >= 0 - at `$.tokens.prompt`") into
    {"tokens.prompt": ["Expected `int` >= 0"]}."""
    match = _ERROR_AT.match(message)
    text, path = (match["message"], match["path"] or "$") if match else (message, "$")
    if match and match["key"]:
        text = f"key: {text}"
    path = re.sub(r"^\$(\[\d+\])?\.?", "", path)
    path = path.split("[...]")[0]  # msgspec does not name the dict key at fault: report the dict
    named = _FIELD_IN_MESSAGE.match(text)
    if named:
        path = f"{path}.{named['name']}" if path else named["name"]
    return {path or "record": [text]}


def record_problems(record: RecordV1, *, now: datetime, max_age: timedelta) -> Errors:
    """Rules that involve more than one field, or the clock."""
    errors: Errors = {}
    t = record.tokens
    if t.prompt_cached > t.prompt:
        errors["tokens.prompt_cached"] = ["must be <= tokens.prompt (prompt includes cached tokens)"]
    elif t.prompt_cached + t.prompt_cache_write > t.prompt:
        errors["tokens.prompt_cache_write"] = [
            "tokens.prompt_cached + tokens.prompt_cache_write must be <= tokens.prompt "
            "(prompt includes cache reads and writes)"
        ]
    if t.system + t.tool > t.prompt:
        errors["tokens.system"] = ["tokens.system + tokens.tool must be <= tokens.prompt"]
    if t.structural > t.completion:
        errors["tokens.structural"] = ["must be <= tokens.completion"]
    if t.reasoning > t.completion:
        errors["tokens.reasoning"] = [
            f"must be <= tokens.completion (reasoning is part of completion): reasoning {t.reasoning} > "
            f"completion {t.completion}"
        ]
    elif t.structural + t.reasoning > t.completion:
        errors["tokens.reasoning"] = ["tokens.structural + tokens.reasoning must be <= tokens.completion"]
    if t.draft_accepted > t.draft:
        errors["tokens.draft_accepted"] = ["must be <= tokens.draft"]
    if record.ts > now + timedelta(hours=24):
        errors["ts"] = ["must be at most 24 h in the future"]
    elif record.ts < now - max_age:
        errors["ts"] = [f"must be within the last {max_age.days} days"]
    return errors


_line_of = methodcaller("get", BUSINESS_LINE)


def limits_refused(records: Sequence[RecordV1], *, limits: KeyLimits, dim_keys: set[str] | None = None) -> set[int]:
    """Positions of the records that write a business line the key may not, or send a
    reconciliation record it may not. The batch is first tested whole, in passes that run in C
    (the set of its lines, and of its dim keys, which the fast path has already); only a batch
    that fails is looked at record by record. How far back a key may write is checked in
    decode_batch's own loop (its window narrows the fast path's)."""
    lines, kinds = bool(limits.business_lines), not limits.reconciliation
    if not records or not (lines or kinds):
        return set()
    if dim_keys is None:
        dim_keys = set(chain.from_iterable(map(_dims_of, records)))
    foreign = lines and not set(map(_line_of, map(_dims_of, records))) <= limits.business_lines
    if not (foreign or (kinds and RECONCILIATION_DIM in dim_keys) or _spelled_otherwise(dim_keys)):
        return set()
    return {i for i, record in enumerate(records) if _limit_problems(record, limits=limits)}


def _limit_problems(
    record: RecordV1, *, limits: KeyLimits, earliest: datetime | None = None, now: datetime | None = None
) -> Errors:
    """Why the record is beyond the key's limits; its age only when given `earliest` and `now`."""
    errors: Errors = {}
    key = limits.key
    line = record.dims.get(BUSINESS_LINE)
    if limits.business_lines and line not in limits.business_lines:
        allowed = ", ".join(sorted(limits.business_lines))
        if line is None:
            errors[f"dims.{BUSINESS_LINE}"] = [f"missing; key {key!r} writes only named lines (allowed: {allowed})"]
        else:
            errors[f"dims.{BUSINESS_LINE}"] = [
                f"business line {line!r} is not allowed for key {key!r} (allowed: {allowed})"
            ]
    if not limits.reconciliation and RECONCILIATION_DIM in record.dims:
        errors[f"dims.{RECONCILIATION_DIM}"] = [
            f"key {key!r} may not send reconciliation records; an admin can allow them for the key"
        ]
    if limits.business_lines or not limits.reconciliation:
        for name in _spelled_otherwise(record.dims):
            folded = name.lower().replace("-", "_")
            errors[f"dims.{name}"] = [f"{name!r} is {folded!r} spelled otherwise; key {key!r} is limited on {folded!r}"]
    if earliest is not None and now is not None and limits.backdate is not None and record.ts < earliest:
        errors["ts"] = [
            f"record is {_days(now - record.ts)} days old; key {key!r} accepts records up to "
            f"{_days(limits.backdate)} days old; an admin can mark the key for backfill"
        ]
    return errors


def _days(age: timedelta) -> str:
    days = age / timedelta(days=1)
    return f"{days:.0f}" if days >= 10 or days == int(days) else f"{days:.1f}"


def _record_id_of(raw: bytes) -> str:
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return ""
    rid = value.get("record_id") if isinstance(value, dict) else None
    return rid[:128] if isinstance(rid, str) else ""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _decode_items(items: list[bytes]) -> tuple[list[tuple[int, RecordV1]], list[Rejected]]:
    good: list[tuple[int, RecordV1]] = []
    bad: list[Rejected] = []
    for index, raw in enumerate(items):
        try:
            good.append((index, msgspec.json.decode(raw, type=RecordV1)))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            bad.append(Rejected(index, _record_id_of(raw), error_field(str(exc)), _text(raw)))
        except RecursionError:
            bad.append(Rejected(index, "", {"record": [TOO_DEEP]}, _text(raw)))
    return good, bad


def _split_ndjson(body: bytes) -> list[bytes]:
    return [line for line in body.split(b"\n") if line.strip()]


_dims_of = attrgetter("dims")
_HEX_DIGITS = b"0123456789abcdef"


def _prompt_hashes_valid(records: list[_RecordV1Fast]) -> bool:
    """Every prompt hash is lowercase hex (RecordV1's pattern; the fast type checked its length)."""
    hashes = "".join([r.prompt_hash for r in records if r.prompt_hash is not None])
    return hashes.isascii() and not hashes.encode().translate(None, _HEX_DIGITS)


def _dims_shared(records: list[_RecordV1Fast]) -> set[str] | None:
    """Turn records decoded as _RecordV1Fast into RecordV1 (the same layout), each with its dims
    as a dict: one dict per distinct dims text of the batch, decoded and checked once (records
    never change their dims). The batch's dim keys when every dims text is valid, else None."""
    shared: dict[bytes, dict[str, str]] = {}
    get = shared.get
    try:
        for record in records:
            text = bytes(record.dims)
            dims = get(text)
            if dims is None:
                dims = shared[text] = _decode_dims(text)
            record.dims = dims  # type: ignore[assignment]
            record.__class__ = RecordV1  # type: ignore[assignment]
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    keys = set(chain.from_iterable(shared.values()))
    new = keys - _GOOD_DIM_KEYS
    for key in new:
        try:
            msgspec.convert(key, type=DimKey)
        except msgspec.ValidationError:
            return None
    if len(_GOOD_DIM_KEYS) < _GOOD_DIM_KEYS_LIMIT:
        _GOOD_DIM_KEYS.update(new)
    return keys


def _fast_records(body: bytes, *, ndjson: bool) -> tuple[list[RecordV1], set[str]] | None:
    """Every record of the body and the dim keys they use, when all of them are valid RecordV1;
    None when any is not (or the body is not a batch), and then the strict path tells which
    and why."""
    try:
        if ndjson:
            records = _decode_list_fast(b"[" + b",".join(_split_ndjson(body)) + b"]")
        else:
            records = _decode_batch_fast(body).records
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    if not _prompt_hashes_valid(records):
        return None
    keys = _dims_shared(records)
    return (records, keys) if keys is not None else None  # type: ignore[return-value]


def _utf8_problem(body: bytes) -> str | None:
    """Why the body is not UTF-8 text, or None. Only the slow path asks: a body the fast path
    accepted was valid UTF-8 (msgspec checks every string, and bytes outside one are malformed)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return _NOT_UTF8.format(at=0, hint=f"starts with {name}")
    if b"\x00" in body[:4096]:  # JSON text never holds a raw NUL; UTF-16 and UTF-32 are full of them
        at = body.index(b"\x00")
        return f"Body holds a raw NUL byte at {at} (UTF-16 or UTF-32?); JSON must be sent as UTF-8, NUL escaped"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _NOT_UTF8.format(at=exc.start, hint=f"{body[exc.start : exc.start + 1]!r} is not UTF-8; latin-1?")
    return None


def _typed_items(body: bytes, *, ndjson: bool, max_records: int) -> tuple[list[tuple[int, RecordV1]], list[Rejected]]:
    """Decode a body into (index, record) pairs and rejections, item by item with RecordV1 (the
    path for a batch _fast_records refused: it says which records are wrong and why). The
    items are counted before any is decoded, so a body of a million tiny bad items costs one
    list, not a million rejections."""
    problem = _utf8_problem(body)
    if problem:
        raise BodyError(problem)
    if ndjson:
        lines = _split_ndjson(body)
        _check_count(len(lines), max_records)
        return _decode_items(lines)
    try:
        raw_batch = msgspec.json.decode(body, type=_RawBatch)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BodyError(f'Body must be a JSON object {{"records": [...]}}: {exc}') from exc
    except RecursionError as exc:
        raise BodyError(f"Body: {TOO_DEEP}.") from exc
    _check_count(len(raw_batch.records), max_records)
    return _decode_items([bytes(item) for item in raw_batch.records])


def _check_count(total: int, max_records: int) -> None:
    if total > max_records:
        raise TooManyRecords(f"A batch holds at most {max_records} records; this one has {total}.")


def _check_ndjson_lines(body: bytes, max_records: int) -> None:
    """Refuse NDJSON with too many lines before splitting it: a 10 MB body of "1\\n" is five
    million lines. Counting newlines is cheap; only when there are enough of them are the
    non-blank lines counted."""
    if body.count(b"\n") >= max_records:
        _check_count(sum(1 for _ in _NON_BLANK_LINE.finditer(body)), max_records)


def _decoded_items(
    body: bytes, *, ndjson: bool, max_records: int, limits: KeyLimits | None
) -> tuple[Iterable[tuple[int, RecordV1]], list[Rejected], set[int]]:
    """The body's (index, record) pairs, the items refused already, and the indices of the
    records beyond the key's business lines or reconciliation limit."""
    fast = _fast_records(body, ndjson=ndjson)
    if fast is not None:
        records, dim_keys = fast
        _check_count(len(records), max_records)
        refused = limits_refused(records, limits=limits, dim_keys=dim_keys) if limits is not None else set()
        return enumerate(records), [], refused
    typed, rejected = _typed_items(body, ndjson=ndjson, max_records=max_records)
    if limits is None:
        return typed, rejected, set()
    positions = limits_refused([record for _, record in typed], limits=limits)
    return typed, rejected, {typed[position][0] for position in positions}


def decode_batch(
    body: bytes,
    *,
    ndjson: bool,
    max_records: int,
    max_age: timedelta,
    now: datetime | None = None,
    limits: KeyLimits | None = None,
) -> DecodedBatch:
    """Decode and validate a request body. Valid records come back in order, without repeats
    of the same (record_id, ts) inside the batch; invalid ones come back as Rejected, and so do
    those beyond the sending key's `limits`."""
    if not body.strip():
        raise BodyError('Body is empty; send {"records": [...]} or NDJSON.')
    if ndjson:
        _check_ndjson_lines(body, max_records)
    now = now or datetime.now(UTC)
    items, rejected, refused = _decoded_items(body, ndjson=ndjson, max_records=max_records, limits=limits)
    result = DecodedBatch(rejected=rejected)
    accept = result.records.append
    seen: dict[str, datetime] = {}
    latest, earliest = now + timedelta(hours=24), now - max_age
    # The key's own window narrows the fast path's: an older record takes the full path below.
    key_earliest = now - limits.backdate if limits is not None and limits.backdate is not None else None
    fast_earliest = max(earliest, key_earliest) if key_earliest is not None else earliest
    # JSON can carry a NUL only as the escape \u0000; PostgreSQL text cannot store it.
    nul = b"\\u0000" in body
    for index, record in items:
        # The common case in one expression: what record_problems checks holds, and the
        # record_id is new in this batch. Anything else takes the full path below.
        t = record.tokens
        if (
            t.prompt_cached + t.prompt_cache_write <= t.prompt
            and t.system + t.tool <= t.prompt
            and t.structural + t.reasoning <= t.completion
            and t.draft_accepted <= t.draft
            and fast_earliest <= record.ts <= latest
            and record.record_id not in seen
            and not nul
            and index not in refused
        ):
            seen[record.record_id] = record.ts
            accept(record)
            continue
        problems = record_problems(record, now=now, max_age=max_age)
        if limits is not None:
            for name, messages in _limit_problems(record, limits=limits, earliest=key_earliest, now=now).items():
                problems.setdefault(name, []).extend(messages)
        if nul and b"\\u0000" in msgspec.json.encode(record):
            problems["record"] = ["text fields must not contain NUL (\\u0000)"]
        first_ts = seen.get(record.record_id)
        if first_ts is not None and first_ts != record.ts:
            problems["record_id"] = ["repeated in this batch with a different ts"]
        if problems:
            raw = msgspec.json.encode(record).decode()
            result.rejected.append(Rejected(index, record.record_id, problems, raw))
        elif first_ts is not None:
            result.duplicates += 1
        else:
            seen[record.record_id] = record.ts
            result.records.append(record)
    result.rejected.sort(key=lambda r: r.index)
    return result
