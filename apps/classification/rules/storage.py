"""Rule columns over the stored records: `ingest_record` and the tables it points to.

Apart from the language modules because it reads the enum codes from the Django models.

    sql, params = compile_sql(tree, record_columns())
    cursor.execute(f"SELECT r.record_key FROM {RECORD_FROM} WHERE {sql}", params)
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.accounts.models import CollectorKey
from apps.ingest.models import (
    TIMING_FIELDS,
    TOKEN_FIELDS,
    DimSet,
    Endpoint,
    FinishReason,
    QualityTier,
    Record,
    ServedModel,
    Status,
)

from .compile_sql import Column

RECORD_FROM = (
    f"{Record._meta.db_table} r JOIN {ServedModel._meta.db_table} m ON m.id = r.model_id "
    f"JOIN {DimSet._meta.db_table} d ON d.id = r.dims_id JOIN {CollectorKey._meta.db_table} k ON k.id = r.source_id"
)


def choice_codes(choices: Iterable[tuple[int, str]]) -> dict[str, int]:
    """IntegerChoices.choices ([(0, "ok"), ...]) as the codes of a Column ({"ok": 0, ...})."""
    return {label: value for value, label in choices}


def record_columns(*, record: str = "r", model: str = "m", dims: str = "d", source: str = "k") -> dict[str, Column]:
    """Every field of RECORD_SCHEMA over RECORD_FROM (or the same tables under other aliases).
    A model version stored as "" (none sent) reads as null."""
    r = record
    return {
        "record_id": Column(f"{r}.record_id"),
        "source": Column(f"{source}.name"),
        "model": Column(f"{model}.name"),
        "model_version": Column(f"NULLIF({model}.version, '')"),
        "endpoint": Column(f"{r}.endpoint", choice_codes(Endpoint.choices)),
        "attempt": Column(f"{r}.attempt"),
        "retry_of": Column(f"{r}.retry_of"),
        "quality_tier": Column(f"{r}.quality_tier", choice_codes(QualityTier.choices)),
        "prompt_hash": Column(f"encode({r}.prompt_hash, 'hex')"),
        "outcome.status": Column(f"{r}.status", choice_codes(Status.choices)),
        "outcome.finish_reason": Column(f"{r}.finish_reason", choice_codes(FinishReason.choices)),
        **{f"tokens.{name}": Column(f"{r}.{name}") for name in TOKEN_FIELDS},
        **{f"timing.{name}": Column(f"{r}.{name}") for name in TIMING_FIELDS},
        "dims.*": Column(f"COALESCE({dims}.dims ->> CAST(%s AS text), '')"),
    }
