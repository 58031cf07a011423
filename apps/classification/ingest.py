"""Classification at ingest: the class rollup written in the statement that stores a batch.

Ingest stores a batch in one statement; for speed the new records' tokens are added to the
class rollup (HourlyClass) in that same statement and transaction. Ingest does not know
classification: this module hands it a `Companion` (ingest's shape for a later stage's part of
the statement), and apps.pipeline composes the two. Each staged row carries the class.reason id
of its eight token components, decided in Python (engine.Classifier) before the transaction;
the days a late record may have turned stored records into duplicates are marked in
classification's own DirtyDay in the batch's transaction (the reclassify job consumes them).
The batch holds its days' reclassification locks shared, so reclassifying a day waits for the
batches of that day in flight and holds new ones back, while other days' batches go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from apps.classification.engine import COMPONENTS
from apps.classification.models import HourlyClass
from apps.classification.services import batch_classify, days_lock_shared, dirty_days_mark
from apps.classification.sql import component_tokens_sql
from apps.ingest.contract import RecordV1
from apps.ingest.services import Companion, Prepared

# The staged rows carry the reason id of each of their token components (engine.COMPONENTS).
_REASON_COLUMNS = tuple(f"reason_{i}" for i in range(len(COMPONENTS)))
# The tokens of each component, in engine.COMPONENTS order, as SQL over the staging row s.
_COMPONENT_SQL = component_tokens_sql("s")
_STAGE_REASONS = ", ".join(f"s.{column}" for column in _REASON_COLUMNS)
# Summed per group as the per-record filter `tokens > 0` would: only the positive parts count.
_COMPONENT_SUMS = ", ".join(f"sum(greatest({tokens}, 0)) AS tokens_{i}" for i, tokens in enumerate(_COMPONENT_SQL))
_COMPONENT_VALUES = ", ".join(f"(p.{column}, {i}, p.tokens_{i})" for i, column in enumerate(_REASON_COLUMNS))
_CLASS_KEY = "hour, source_id, model_id, dims_id, ruleset_id, reason_id, component"


def class_rollup_ctes(stage: str, inserted: str) -> str:
    """The CTEs that add the inserted rows of the staging table `stage` (those of its rows `s`
    for which the SQL condition `inserted` holds) to HourlyClass, in key order (concurrent
    batches lock rollup rows in the same order). One parameter: the rule set id."""
    return f""", pre AS (
    -- The inserted rows of the stage, summed per rollup key and combination of reasons first:
    -- far fewer rows to unpivot into components than one a record.
    SELECT date_trunc('hour', s.ts, 'UTC') AS hour, s.source_id, s.model_id, s.rollup_id, {_STAGE_REASONS},
           {_COMPONENT_SUMS}
    FROM {stage} s
    WHERE {inserted}
    GROUP BY 1, 2, 3, 4, {_STAGE_REASONS}
), cls AS (
    SELECT p.hour, p.source_id, p.model_id, p.rollup_id AS dims_id, %b::int AS ruleset_id, x.reason_id, x.component,
           sum(x.tokens)::bigint AS tokens
    FROM pre p
    CROSS JOIN LATERAL (VALUES {_COMPONENT_VALUES}) AS x(reason_id, component, tokens)
    WHERE x.tokens > 0
    GROUP BY 1, 2, 3, 4, 5, 6, 7
), upc AS (
    INSERT INTO {HourlyClass._meta.db_table} AS c ({_CLASS_KEY}, tokens)
    SELECT * FROM cls ORDER BY {_CLASS_KEY}
    ON CONFLICT ({_CLASS_KEY}) DO UPDATE SET tokens = c.tokens + excluded.tokens
)"""


def batch_prepare(source_id: int, records: Sequence[RecordV1]) -> Prepared:
    """Classify a batch with the active rule set (before the batch's transaction)."""
    classified = batch_classify(source_id=source_id, records=records)
    # The days whose class rollup the batch adds to or marks dirty: a reclassification of one
    # of them waits for the batch, and the batch for it (classification.services.days_lock_shared).
    days = {r.ts.astimezone(UTC).date() for r in records} | classified.dirty_days

    def before() -> None:
        days_lock_shared(days=days)

    def after() -> None:
        if classified.dirty_days:
            dirty_days_mark(days=classified.dirty_days)

    return Prepared(values=classified.reasons, params=[classified.ruleset_id], after=after, before=before)


CLASSES = Companion(
    name="classes",
    columns=tuple((column, "int2") for column in _REASON_COLUMNS),
    ctes=class_rollup_ctes,
    prepare=batch_prepare,
)
