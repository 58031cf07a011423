"""Classification at ingest: the class rollup written in the statement that stores a batch.

Ingest stores a batch in one statement; for speed the new records' tokens are added to the
class rollup (HourlyClass) in that same statement and transaction. Ingest does not know
classification: this module hands it a `Companion` (ingest's shape for a later stage's part of
the statement: its staging columns, its CTEs composed over the batch's rows ingest describes in
a `BatchRows`, its parameters), and apps.pipeline composes the two. The class.reason ids of each record's eight
token components are decided in Python (engine.Classifier) before the transaction; a batch
holds a few distinct combinations of them, sent once as arrays, and each staged row carries the
index of its own;
the days a late record may have turned stored records into duplicates are marked in
classification's own DirtyDay in the batch's transaction (the reclassify job consumes them).
The batch holds its days' reclassification locks shared, so reclassifying a day waits for the
batches of that day in flight and holds new ones back, while other days' batches go on.
"""

from __future__ import annotations

from collections.abc import Sequence

from apps.classification.engine import COMPONENTS
from apps.classification.services import batch_classify, days_lock_shared, dirty_days_mark
from apps.classification.sql import CLASS_ROLLUP, component_tokens_sql
from apps.common.buckets import hour_floor_sql, rollup_day_of, utc_buckets
from apps.common.composed import SQL, Identifier, Literal, col, commas, names
from apps.ingest.contract import RecordV1
from apps.ingest.services import BatchRows, Companion, Cte, Prepared, StageColumn

# The staged rows carry the index (from 0) of their combination of reasons in the batch's list,
# which goes as one array a component (engine.COMPONENTS order) of class.reason ids.
_REASONS_COLUMN = "reasons"
_REASON_COLUMNS = tuple(f"reason_{i}" for i in range(len(COMPONENTS)))


def class_rollup_ctes(rows: BatchRows) -> tuple[Cte, ...]:
    """The CTEs that add the batch's inserted rows (`rows`, read as `s`) to HourlyClass, in key
    order (concurrent batches lock rollup rows in the same order). Parameters: the batch's
    combinations of reasons (an array of reason ids a component) and the rule set id."""
    reasons = names(_REASON_COLUMNS)
    # The tokens of each component, in engine.COMPONENTS order, over the staging row s, summed per
    # group as the per-record filter `tokens > 0` would: only the positive parts count.
    sums = commas(
        SQL("sum(greatest({}, 0)) AS {}").format(tokens, Identifier(f"tokens_{i}"))
        for i, tokens in enumerate(component_tokens_sql("s"))
    )
    values = commas(
        SQL("({}, {}, {})").format(col("r", column), Literal(i), col("p", f"tokens_{i}"))
        for i, column in enumerate(_REASON_COLUMNS)
    )
    combos = SQL("""    SELECT n - 1 AS reasons, {reasons}
    FROM unnest({arrays}) WITH ORDINALITY AS c({reasons}, n)""").format(
        reasons=reasons, arrays=commas(SQL("%b::int2[]") for _ in COMPONENTS)
    )
    # The inserted rows of the stage, summed per rollup key and combination of reasons first:
    # far fewer rows to unpivot into components than one a record.
    pre = SQL("""    SELECT {hour} AS hour, s.source_id, s.model_id, {rollup_dims} AS rollup_id, {combo},
           {sums}
    FROM {stage} s
    WHERE {inserted}
    GROUP BY 1, 2, 3, 4, 5""").format(
        hour=SQL(hour_floor_sql("s.ts")),
        rollup_dims=col("s", rows.rollup_dims),
        combo=col("s", _REASONS_COLUMN),
        sums=sums,
        stage=rows.table,
        inserted=rows.inserted("s"),
    )
    cls = SQL("""    SELECT p.hour, p.source_id, p.model_id, p.rollup_id AS dims_id, %b::int AS ruleset_id, x.reason_id,
           x.component, sum(x.tokens)::bigint AS tokens
    FROM pre p
    JOIN combos r ON r.reasons = p.{combo}
    CROSS JOIN LATERAL (VALUES {values}) AS x(reason_id, component, tokens)
    WHERE x.tokens > 0
    GROUP BY 1, 2, 3, 4, 5, 6, 7""").format(combo=Identifier(_REASONS_COLUMN), values=values)
    upc = SQL("    {}").format(CLASS_ROLLUP.upsert(Identifier("cls"), alias="c"))
    return (Cte("combos", combos), Cte("pre", pre), Cte("cls", cls), Cte("upc", upc))


def batch_prepare(source_id: int, records: Sequence[RecordV1]) -> Prepared:
    """Classify a batch with the active rule set (before the batch's transaction)."""
    classified = batch_classify(source_id=source_id, records=records)
    # The days whose class rollup the batch adds to or marks dirty: a reclassification of one
    # of them waits for the batch, and the batch for it (classification.services.days_lock_shared).
    days = utc_buckets([r.ts for r in records], rollup_day_of) | classified.dirty_days

    def before() -> None:
        days_lock_shared(days=days)

    def after() -> None:
        if classified.dirty_days:
            dirty_days_mark(days=classified.dirty_days)

    combos: dict[tuple[int, ...], int] = {}
    index = combos.setdefault
    values = [(index(reasons, len(combos)),) for reasons in classified.reasons]
    arrays = [[reasons[i] for reasons in combos] for i in range(len(COMPONENTS))]
    return Prepared(values=values, params=[*arrays, classified.ruleset_id], after=after, before=before)


CLASSES = Companion(
    name="classes",
    columns=(StageColumn(_REASONS_COLUMN, "int2"),),
    ctes=class_rollup_ctes,
    prepare=batch_prepare,
)
