"""Ingest's statement with a later stage's part (apps.ingest.services.Companion): the batch's
rows a companion reads are a typed object, and its CTEs follow ingest's own."""

from __future__ import annotations

from apps.classification.ingest import CLASSES, class_rollup_ctes
from apps.common.composed import Identifier, text
from apps.ingest.services import BatchRows, Cte, _statement


def test_the_inserted_rows_are_named_by_the_alias_the_companion_chooses() -> None:
    some = BatchRows(Identifier("stage"), "rollup_id", all_new=False)
    assert text(some.inserted("x")) == (
        '("x"."ts", "x"."source_id", "x"."record_key", "x"."record_id") IN '
        "(SELECT ts, source_id, record_key, record_id FROM stored)"
    )
    assert text(BatchRows(Identifier("stage"), "rollup_id", all_new=True).inserted("x")) == "true"


def test_a_cte_is_written_after_those_before_it() -> None:
    assert text(Cte("totals", Identifier("agg")).composed()) == ', "totals" AS (\n"agg"\n)'


def test_the_class_rollup_reads_the_stage_it_is_given() -> None:
    ctes = class_rollup_ctes(BatchRows(Identifier("my_stage"), "rollup_id", all_new=False))
    assert [cte.name for cte in ctes] == ["combos", "pre", "cls", "upc"]
    pre = text(ctes[1].body)
    assert 'FROM "my_stage" s\n    WHERE ("s"."ts", "s"."source_id"' in pre
    assert '"s"."rollup_id" AS rollup_id, "s"."reasons"' in pre
    assert text(ctes[3].body).startswith(
        '    INSERT INTO "classification_hourlyclass" AS "c" ("hour", "source_id", "model_id", "dims_id", '
        '"ruleset_id", "reason_id", "component", "tokens")\n    SELECT * FROM "cls" ORDER BY "hour"'
    )


def test_the_statement_with_a_companion_holds_its_ctes_after_ingests_and_its_column_in_the_stage() -> None:
    statement = _statement(CLASSES)
    assert statement.insert_new.index(", agg AS (") < statement.insert_new.index(', "combos" AS (')
    assert statement.insert_new.index(', "upc" AS (') < statement.insert_new.index("SELECT coalesce(sum(records)")
    assert statement.copy.endswith('"prompt_hash", "rollup_id", "reasons") FROM STDIN (FORMAT BINARY)')
    assert statement.types[-1] == "int2"
