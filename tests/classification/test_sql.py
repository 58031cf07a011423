"""Classification's SQL as composed statements (apps.classification.rules.compile_sql,
rules.storage and apps.classification.sql): the exact text of a few rules over the stored
records, and the shape of the statements that reclassify a day and compare two rule sets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.classification.rules import Column, compile_sql, parse_rule
from apps.classification.rules.storage import RECORD_FROM, record_columns
from apps.classification.sql import MoveRule, moves_sql, reclassify_insert_sql, ruleset_sql
from apps.common.buckets import hour_floor_sql
from apps.common.composed import PARAM, SQL, text

D1 = datetime(2026, 3, 1, tzinfo=UTC)
D2 = datetime(2026, 3, 2, tzinfo=UTC)
# Every built-in off: the reasons are the plain ones but where a move takes them.
NO_BUILTINS = frozenset(
    {"failed", "duplicate", "truncated", "prefix_cache", "padding", "spec_rejected", "recompute", "unattributed"}
)
FROM = (
    '"ingest_record" r JOIN "ingest_servedmodel" m ON m.id = r.model_id JOIN "ingest_dimset" d ON d.id = r.dims_id '
    'JOIN "accounts_collectorkey" k ON k.id = r.source_id'
)
DIM = '(COALESCE("d"."dims" ->> CAST(%s AS text), \'\')) = CAST(%s AS text)'
FIELDS = (
    "ts source_id model_id status finish_reason prompt prompt_cached completion structural padding draft "
    "draft_accepted recomputed reasoning prompt_cache_write"
).split()
WINDOW = (
    "(count(*) OVER (PARTITION BY y.source_id, y.prompt_hash, y.model_name, y.business_line ORDER BY y.ts "
    "RANGE BETWEEN INTERVAL '300 seconds' PRECEDING AND INTERVAL '1 microsecond' PRECEDING) > 0) AS duplicate"
)
SUMS = ", ".join(
    f'sum(GREATEST({tokens}, 0)) AS "tokens_{i}"'
    for i, tokens in enumerate(
        [
            '"x"."prompt_cached"',
            '"x"."prompt" - "x"."prompt_cached" - "x"."prompt_cache_write"',
            '"x"."structural"',
            '"x"."completion" - "x"."structural" - "x"."reasoning"',
            '"x"."padding"',
            '"x"."draft" - "x"."draft_accepted"',
            '"x"."recomputed"',
            '"x"."reasoning"',
            '"x"."prompt_cache_write"',
        ]
    )
)
BEFORE = (
    '2, CASE WHEN "x"."a_move_0" THEN 101 ELSE 2 END, 3, CASE WHEN "x"."a_move_0" THEN 101 ELSE 4 END, 2, 4, 2, 15, 17'
)


@pytest.mark.parametrize(
    ("rule", "expected", "params"),
    [
        (
            'outcome.status == "ok" and tokens.prompt > 1000',
            '((("r"."status") = %s) AND (("r"."prompt") > CAST(%s AS bigint)))',
            [0, 1000],
        ),
        (
            'dims["cost-center"] in ["a", "b"] or model_version == null',
            '(((COALESCE("d"."dims" ->> CAST(%s AS text), \'\')) IN (CAST(%s AS text), CAST(%s AS text))) '
            'OR ((NULLIF("m"."version", \'\')) IS NULL))',
            ["cost-center", "a", "b"],
        ),
        (
            "tokens.prompt - tokens.prompt_cached > 2 * -tokens.completion",
            '((CAST(("r"."prompt") AS numeric) - CAST(("r"."prompt_cached") AS numeric)) > '
            '(CAST(CAST(%s AS bigint) AS numeric) * CAST((-CAST(("r"."completion") AS numeric)) AS numeric)))',
            [2],
        ),
        (
            'not contains(dims.feature, "faq") and endpoint != "embeddings"',
            '((NOT (strpos((COALESCE("d"."dims" ->> CAST(%s AS text), \'\')), CAST(%s AS text)) > 0)) '
            'AND ((("r"."endpoint") <> %s) IS TRUE))',
            ["feature", "faq", 4],
        ),
        (
            "outcome.finish_reason == model_version",
            '(((CASE ("r"."finish_reason") '
            + " ".join(["WHEN %s THEN CAST(%s AS text)"] * 6)
            + ' END) = (NULLIF("m"."version", \'\'))) IS TRUE)',
            [1, "stop", 2, "length", 3, "tool_calls", 4, "abort", 5, "error", 6, "repetition"],
        ),
    ],
)
def test_a_rule_compiles_to_its_sql_with_every_literal_a_parameter(rule: str, expected: str, params: list) -> None:
    expression, found = compile_sql(parse_rule(rule), record_columns())

    assert (text(expression), found) == (expected, params)


def test_the_record_columns_read_the_aliases_they_are_given() -> None:
    columns = record_columns(record="q", dims="e")
    expression, params = compile_sql(parse_rule('dims.team == "x" and prompt_hash != null'), columns)

    assert text(expression) == (
        '(((COALESCE("e"."dims" ->> CAST(%s AS text), \'\')) = CAST(%s AS text)) '
        'AND ((encode("q"."prompt_hash", \'hex\')) IS NOT NULL))'
    )
    assert params == ["team", "x"]
    assert text(RECORD_FROM) == FROM


def test_a_wildcard_column_needs_exactly_one_placeholder() -> None:
    columns = {"dims.*": Column(SQL("{} || {}").format(PARAM, PARAM))}

    with pytest.raises(ValueError, match="exactly one placeholder"):
        compile_sql(parse_rule('dims.team == "x"'), columns)


def _records(flags: list[tuple[str, str]]) -> str:
    """records_sql's text with these move flags, each (its name, its expression)."""
    computed = [f'({DIM}) AS "reconciliation"', *(f'{expression} AS "{name}"' for name, expression in flags)]

    def select(extra: str) -> str:
        fields = [*(f'"r"."{f}"' for f in FIELDS), "COALESCE(d.rollup_id, d.id) AS rollup_dims_id"]
        return ", ".join([*fields, extra, *computed])

    carried = [*FIELDS, "rollup_dims_id"]
    outer = ", ".join(
        [*(f'"y"."{f}"' for f in carried), WINDOW, *(f'"y"."{n}"' for n in ["reconciliation", *dict(flags)])]
    )
    candidate = "r.status = 0 AND r.prompt_hash IS NOT NULL"
    narrow = 'r.prompt_hash, m.name COLLATE "C" AS model_name, d.business_line COLLATE "C" AS business_line'
    return (
        f"SELECT {outer} FROM (SELECT {select(narrow)} FROM {FROM} WHERE r.ts >= %s AND r.ts < %s AND {candidate} "
        f"OFFSET 0) y UNION ALL SELECT {select('false AS duplicate')} FROM {FROM} "
        f"WHERE r.ts >= %s AND r.ts < %s AND NOT ({candidate})"
    )


def _decisive(flags: list[str]) -> str:
    names = ["status", "finish_reason", "duplicate", "reconciliation", *flags]
    return ", ".join(f'"x"."{n}" AS "{n}"' for n in names)


def test_reclassifying_inserts_the_class_rows_of_the_records_per_hour_and_reason() -> None:
    compiled = ruleset_sql(
        disabled=NO_BUILTINS, moves=[MoveRule(parse_rule('dims.team == "x"'), (1, 3), 101)], prefix="a_"
    )

    statement, params = reclassify_insert_sql(compiled=compiled, ruleset_id=7, start=D1, end=D2)

    keys = f'{hour_floor_sql("x.ts")} AS "k0", x.source_id AS "k1", x.model_id AS "k2", x.rollup_dims_id AS "k3"'
    tokens = ", ".join(f'"x"."tokens_{i}"' for i in range(9))
    assert text(statement) == (
        'INSERT INTO "classification_hourlyclass" '
        "(hour, source_id, model_id, dims_id, ruleset_id, reason_id, component, tokens) "
        "SELECT x.k0, x.k1, x.k2, x.k3, %s, c.reason_id, c.component, sum(c.tokens) "
        f"FROM (SELECT {keys}, {_decisive(['a_move_0'])}, {SUMS} "
        f"FROM ({_records([('a_move_0', f'({DIM})')])}) x WHERE x.ts >= %s GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9) x "
        f"CROSS JOIN LATERAL unnest(ARRAY[0, 1, 2, 3, 4, 5, 6, 7, 8], ARRAY[{BEFORE}], ARRAY[{tokens}]) "
        "AS c(component, reason_id, tokens) WHERE c.tokens > 0 GROUP BY 1, 2, 3, 4, 5, 6, 7"
    )
    flags = ["costplatform.kind", "reconciliation", "team", "x"]
    assert params == [7, *flags, D1 - timedelta(seconds=300), D2, *flags, D1, D2, D1]


def test_two_rule_sets_are_compared_over_the_same_records_by_their_flags_apart() -> None:
    before = ruleset_sql(
        disabled=NO_BUILTINS, moves=[MoveRule(parse_rule('dims.team == "x"'), (1, 3), 101)], prefix="a_"
    )
    after = ruleset_sql(
        disabled=NO_BUILTINS, moves=[MoveRule(parse_rule("tokens.prompt > 10"), (1,), 102)], prefix="b_"
    )

    statement, params = moves_sql(before=before, after=after, start=D1, end=D2)

    records = _records([("a_move_0", f"({DIM})"), ("b_move_0", '(("r"."prompt") > CAST(%s AS bigint))')])
    after_reasons = '2, CASE WHEN "x"."b_move_0" THEN 102 ELSE 2 END, 3, 4, 2, 4, 2, 15, 17'
    tokens = ", ".join(f'"x"."tokens_{i}"' for i in range(9))
    assert text(statement) == (
        "SELECT c.component, c.before, c.after, sum(c.tokens)::bigint "
        f"FROM (SELECT {_decisive(['a_move_0', 'b_move_0'])}, {SUMS} FROM ({records}) x WHERE x.ts >= %s "
        "GROUP BY 1, 2, 3, 4, 5, 6) x "
        f"CROSS JOIN LATERAL unnest(ARRAY[0, 1, 2, 3, 4, 5, 6, 7, 8], ARRAY[{BEFORE}], ARRAY[{after_reasons}], "
        f"ARRAY[{tokens}]) AS c(component, before, after, tokens) WHERE c.tokens > 0 AND c.before <> c.after "
        "GROUP BY 1, 2, 3"
    )
    flags_params = ["costplatform.kind", "reconciliation", "team", "x", 10]
    assert params == [*flags_params, D1 - timedelta(seconds=300), D2, *flags_params, D1, D2, D1]
