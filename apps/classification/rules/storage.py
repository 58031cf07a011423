"""Rule columns over the stored records: `ingest_record` and the tables it points to.

Apart from the language modules because it reads the enum codes from the Django models.

    condition, params = compile_sql(tree, record_columns())
    statement = SQL("SELECT r.record_key FROM {} WHERE {}").format(RECORD_FROM, condition)
    cursor.execute(text(statement), params)
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.accounts.models import CollectorKey
from apps.common.composed import PARAM, SQL, col, table
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

RECORD_FROM = SQL(
    "{} r JOIN {} m ON m.id = r.model_id JOIN {} d ON d.id = r.dims_id JOIN {} k ON k.id = r.source_id"
).format(table(Record), table(ServedModel), table(DimSet), table(CollectorKey))


def choice_codes(choices: Iterable[tuple[int, str]]) -> dict[str, int]:
    """IntegerChoices.choices ([(0, "ok"), ...]) as the codes of a Column ({"ok": 0, ...})."""
    return {label: value for value, label in choices}


def record_columns(*, record: str = "r", model: str = "m", dims: str = "d", source: str = "k") -> dict[str, Column]:
    """Every field of RECORD_SCHEMA over RECORD_FROM (or the same tables under other aliases).
    A model version stored as "" (none sent) reads as null."""
    r = record
    return {
        "record_id": Column(col(r, "record_id")),
        "source": Column(col(source, "name")),
        "model": Column(col(model, "name")),
        "model_version": Column(SQL("NULLIF({}, '')").format(col(model, "version"))),
        "endpoint": Column(col(r, "endpoint"), choice_codes(Endpoint.choices)),
        "attempt": Column(col(r, "attempt")),
        "retry_of": Column(col(r, "retry_of")),
        "quality_tier": Column(col(r, "quality_tier"), choice_codes(QualityTier.choices)),
        "prompt_hash": Column(SQL("encode({}, 'hex')").format(col(r, "prompt_hash"))),
        "outcome.status": Column(col(r, "status"), choice_codes(Status.choices)),
        "outcome.finish_reason": Column(col(r, "finish_reason"), choice_codes(FinishReason.choices)),
        **{f"tokens.{name}": Column(col(r, name)) for name in TOKEN_FIELDS},
        **{f"timing.{name}": Column(col(r, name)) for name in TIMING_FIELDS},
        # The placeholder takes the name after "dims.".
        "dims.*": Column(SQL("COALESCE({} ->> CAST({} AS text), '')").format(col(dims, "dims"), PARAM)),
    }
