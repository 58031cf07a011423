"""The token record v1, defined once: its fields, its token and timing kinds, the words of its
enumerations and its limits.

Every side of the wire reads this module: the edge builds records to it (wire.record), the
spool and the sender read a record's ts with it, and the platform decodes and validates
records with these types (apps/ingest/contract.py: the batch decoder, the key limits) and
stores their token counts in columns of the same names (apps/ingest/models.py). The same
types publish docs/record-v1.schema.json (json_schema). Nothing else lists the token fields:
tests/test_one_record_contract.py fails on a second list.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta

MAX_COUNT = 10**9
MAX_DIMS = 32
MAX_DIM_KEY = 64
MAX_DIM_VALUE = 256
MAX_RECORD_ID = 128
MAX_MODEL = 200
MAX_MODEL_VERSION = 100
DIM_KEY_PATTERN = r"^[A-Za-z0-9_.\-]+$"

Count = Annotated[int, Meta(ge=0, le=MAX_COUNT, description="A token count, 0..10^9.")]
Millis = Annotated[int, Meta(ge=0, le=MAX_COUNT, description="Milliseconds.")]
DimKey = Annotated[str, Meta(min_length=1, max_length=MAX_DIM_KEY, pattern=DIM_KEY_PATTERN)]
DimValue = Annotated[str, Meta(max_length=MAX_DIM_VALUE)]
RecordId = Annotated[str, Meta(min_length=1, max_length=MAX_RECORD_ID)]

Endpoint = Literal["chat.completions", "completions", "responses", "embeddings", "messages"]
Status = Literal["ok", "error", "timeout", "aborted", "rejected"]
FinishReason = Literal["stop", "length", "tool_calls", "abort", "error", "repetition"]
QualityTier = Literal["high", "mid", "low"]
ENDPOINTS: tuple[str, ...] = get_args(Endpoint)
STATUSES: tuple[str, ...] = get_args(Status)
FINISH_REASONS: tuple[str, ...] = get_args(FinishReason)
QUALITY_TIERS: tuple[str, ...] = get_args(QualityTier)

# Collectors mark the records they emit for reconciliation gaps with this dim (only keys allowed
# reconciliation may send it); classification reads it to class their tokens as shadow.
RECONCILIATION_DIM = "costplatform.kind"
RECONCILIATION_VALUE = "reconciliation"


# The record types are declared gc=False: decoded from JSON they cannot form reference cycles,
# and leaving thousands of them a batch out of the cyclic collector's bookkeeping makes
# decoding about a third faster.


# The token kinds of a request: their names, order and meaning (TOKEN_FIELDS). No docstring:
# msgspec would publish it in the schema.
class Tokens(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    prompt: Annotated[Count, Meta(description="All prompt tokens, cached ones INCLUDED (inclusive).")]
    completion: Annotated[Count, Meta(description="Tokens generated, also those before an abort.")]
    prompt_cached: Annotated[Count, Meta(description="Part of `prompt` served from the prefix cache.")] = 0
    system: Annotated[Count, Meta(description="Part of `prompt` from system messages.")] = 0
    tool: Annotated[Count, Meta(description="Part of `prompt` from tool results / retrieved context.")] = 0
    structural: Annotated[Count, Meta(description="Part of `completion` that is format scaffolding.")] = 0
    padding: Annotated[Count, Meta(description="Padding tokens charged to this request.")] = 0
    draft: Annotated[Count, Meta(description="Speculative-decoding tokens proposed.")] = 0
    draft_accepted: Annotated[Count, Meta(description="Part of `draft` accepted.")] = 0
    recomputed: Annotated[Count, Meta(description="Prompt tokens recomputed after preemption.")] = 0
    reasoning: Annotated[
        Count, Meta(description="Part of `completion` spent reasoning (thinking) before the answer; 0 when absent.")
    ] = 0
    prompt_cache_write: Annotated[
        Count,
        Meta(description="Part of `prompt` written into a provider's prompt cache (computed, priced as a write)."),
    ] = 0


class Outcome(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    status: Status
    finish_reason: FinishReason | None = None


class Timing(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    queued: Millis | None = None
    ttft: Millis | None = None
    prefill: Millis | None = None
    decode: Millis | None = None
    e2e: Millis | None = None


class RecordV1(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """One inference request."""

    record_id: Annotated[RecordId, Meta(description="Unique per source; the idempotency key (with ts).")]
    ts: Annotated[datetime, Meta(tz=True, description="Request arrival time, RFC 3339 with offset.")]
    model: Annotated[str, Meta(min_length=1, max_length=MAX_MODEL)]
    tokens: Tokens
    outcome: Outcome
    model_version: Annotated[str, Meta(max_length=MAX_MODEL_VERSION)] | None = None
    endpoint: Endpoint | None = None
    dims: Annotated[
        dict[DimKey, DimValue],
        Meta(max_length=MAX_DIMS, description="Attribution: business_line, team, project, feature, step, …"),
    ] = msgspec.field(default_factory=dict)
    timing: Timing | None = None
    attempt: Annotated[int, Meta(ge=1, le=1000)] = 1
    retry_of: RecordId | None = None
    prompt_hash: (
        Annotated[str, Meta(pattern=r"^[0-9a-f]{16,128}$", description="Hex hash of the normalised prompt.")] | None
    ) = None
    quality_tier: QualityTier | None = None


# The one list of the token kinds (and of the timing fields), in the record's order: the
# platform's record and rollup columns carry the same names.
TOKEN_FIELDS: tuple[str, ...] = Tokens.__struct_fields__
TIMING_FIELDS: tuple[str, ...] = Timing.__struct_fields__


class _TsOnly(msgspec.Struct):
    ts: str | None = None


_decode_ts = msgspec.json.Decoder(_TsOnly).decode


def ts_of(line: bytes) -> datetime | None:
    """The ts of an encoded record (one NDJSON line), None when the line is no JSON object or
    its ts is missing, unreadable or without an offset (the contract wants one). Only the ts is
    decoded: the spool and the sender read it of many lines."""
    try:
        raw = _decode_ts(line).ts
        ts = datetime.fromisoformat(raw) if raw else None
    except (msgspec.DecodeError, ValueError):
        return None
    return ts if ts is not None and ts.tzinfo is not None else None


def json_schema() -> dict[str, Any]:
    """JSON Schema of the token record v1 (docs/record-v1.schema.json)."""
    schema = msgspec.json.schema(RecordV1)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://costplatform.dev/schemas/record-v1.schema.json"
    schema["title"] = "costplatform token record v1"
    schema["description"] = (
        "One record per inference request. Besides the types below: tokens.prompt_cached + "
        "tokens.prompt_cache_write <= tokens.prompt; "
        "tokens.system + tokens.tool <= tokens.prompt; tokens.structural <= tokens.completion; "
        "tokens.reasoning <= tokens.completion and tokens.structural + tokens.reasoning <= tokens.completion; "
        "tokens.draft_accepted <= tokens.draft; ts at most 24 h in the future. Unknown fields are "
        "rejected. A source re-sending the same (record_id, ts) is counted once."
    )
    return schema
