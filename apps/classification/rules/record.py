"""The schema of the token record v1, as rules see it, derived from the contract so that a new
token or timing field becomes usable in rules without touching this package."""

from __future__ import annotations

from apps.ingest.contract import ENDPOINTS, FINISH_REASONS, QUALITY_TIERS, STATUSES, Timing, Tokens

from .schema import INT, STR, FieldSpec, Kind, Schema, Type

_NULLABLE_STR = Type(Kind.STR, nullable=True)
_NULLABLE_INT = Type(Kind.INT, nullable=True)

RECORD_FIELDS: dict[str, FieldSpec] = {
    "record_id": FieldSpec(STR),
    "source": FieldSpec(STR),  # the name of the collector key that sent the record
    "model": FieldSpec(STR),
    "model_version": FieldSpec(_NULLABLE_STR),
    "endpoint": FieldSpec(_NULLABLE_STR, ENDPOINTS),
    "attempt": FieldSpec(INT),
    "retry_of": FieldSpec(_NULLABLE_STR),
    "quality_tier": FieldSpec(_NULLABLE_STR, QUALITY_TIERS),
    "prompt_hash": FieldSpec(_NULLABLE_STR),
    "outcome.status": FieldSpec(STR, STATUSES),
    "outcome.finish_reason": FieldSpec(_NULLABLE_STR, FINISH_REASONS),
    **{f"tokens.{name}": FieldSpec(INT) for name in Tokens.__struct_fields__},
    **{f"timing.{name}": FieldSpec(_NULLABLE_INT) for name in Timing.__struct_fields__},
}

# A missing dim reads as "" (the accessors and SQL columns see to it), so dims are never null.
RECORD_SCHEMA = Schema(RECORD_FIELDS, prefixes={"dims": FieldSpec(STR)})
