"""What rules mean. `evaluate` answers by the Python predicate and by SQL, and asserts they agree."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from apps.classification.rules import (
    BOOL,
    STR,
    Column,
    FieldSpec,
    Kind,
    RuleError,
    Schema,
    Type,
    attribute_accessor,
    check,
    compile_predicate,
    compile_sql,
    dict_accessor,
    parse,
    parse_rule,
)
from apps.common.composed import SQL, col, text
from apps.ingest.contract import RecordV1
from tests import factories

from .conftest import COLUMNS, Evaluate, record

BASE = record()  # tokens.prompt 1200, completion 180, attempt 1, model "qwen2.5-7b-instruct", dims team/feature


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("tokens.prompt == 1200", True),
        ("tokens.prompt != 1200", False),
        ("tokens.prompt < 1200", False),
        ("tokens.prompt <= 1200", True),
        ("tokens.prompt > 1199", True),
        ("tokens.prompt >= 1201", False),
        ('model == "qwen2.5-7b-instruct"', True),
        ('model != "qwen2.5-7b-instruct"', False),
        ("tokens.prompt in [1, 1200]", True),
        ("tokens.prompt not in [1, 1200]", False),
        ('dims.team in ["cs-bot", "search"]', True),
        ('dims.team not in ["search"]', True),
        ('endpoint in ["embeddings", "chat.completions"]', True),
        ('endpoint not in ["embeddings", "chat.completions"]', False),
        ('outcome.status == "ok"', True),
        ('outcome.status != "ok"', False),
        ('outcome.finish_reason == "length"', False),
        ('startswith(model, "qwen")', True),
        ('startswith(model, "wen")', False),
        ('startswith(model, "")', True),
        ('contains(model, "7b")', True),
        ('contains(model, "70b")', False),
        ('contains(model, "")', True),
        ("tokens.prompt + tokens.completion == 1380", True),
        ("tokens.prompt - tokens.prompt_cached == 688", True),
        ("tokens.completion * 2 == 360", True),
        ("-tokens.completion == -180", True),
        ("tokens.prompt * tokens.prompt * tokens.prompt * 9223372036854775807 > 9223372036854775807", True),
        ("true", True),
        ("false", False),
        ("not true", False),
        ('true and model == "x"', False),
        ('false or model != "x"', True),
        ("(attempt == 1) == (tokens.prompt > 0)", True),
        ("(attempt == 1) != (tokens.prompt > 0)", False),
        ('dims.absent == ""', True),
        ('dims["team"] == "cs-bot"', True),
        ('tokens["prompt"] == 1200', True),
        ("model_version == endpoint", False),
        ("contains(dims.team, dims.feature) or startswith(model, model)", True),
    ],
)
def test_each_operator(evaluate: Evaluate, rule: str, expected: bool) -> None:
    assert evaluate(rule, [BASE]) == [expected]


@pytest.mark.parametrize(
    ("rule", "same_as"),
    [
        ("true or false and false", "true or (false and false)"),
        ("false and false or true", "(false and false) or true"),
        ("not false and false", "(not false) and false"),
        ("not false or true", "(not false) or true"),
        ("attempt == 1 and tokens.prompt > 5 or false", "((attempt == 1) and (tokens.prompt > 5)) or false"),
        ("1 + 2 * 3 == 7", "(1 + (2 * 3)) == 7"),
        ("10 - 3 - 2 == 5", "((10 - 3) - 2) == 5"),
        ("2 * 3 - 1 == 5", "((2 * 3) - 1) == 5"),
        ("-2 * 3 == -6", "((-2) * 3) == -6"),
        ("-(1 + 2) == -3", "(0 - 3) == -3"),
        ("- -3 == 3", "3 == 3"),
        ('tokens.prompt > 1 and model in ["a"] or dims.team not in ["b"]', 'dims.team != "b"'),
    ],
)
def test_precedence(evaluate: Evaluate, rule: str, same_as: str) -> None:
    assert parse(rule) == parse(rule)  # deterministic
    assert evaluate(rule, [BASE]) == evaluate(same_as, [BASE])


def test_precedence_is_not_then_comparison_then_and_then_or() -> None:
    tree = parse("not a == b and c or d")

    assert type(tree).__name__ == "Logic" and tree.op == "or"
    conjunction = tree.operands[0]
    assert conjunction.op == "and"
    comparison = conjunction.operands[0]
    assert type(comparison).__name__ == "Compare" and type(comparison.left).__name__ == "Not"


def test_it_refuses_not_applied_to_a_comparison_operand_and_says_how() -> None:
    with pytest.raises(RuleError, match=r"write `not \(a == b\)`"):
        parse_rule('not model == "x"')

    parse_rule('not (model == "x")')


NULLS = record(
    model_version=None,
    endpoint=None,
    retry_of=None,
    quality_tier=None,
    prompt_hash=None,
    timing=None,
    **{"outcome.finish_reason": None},
)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ('model_version == "x"', False),
        ('model_version != "x"', False),
        ('not (model_version == "x")', True),
        ('not (model_version != "x")', True),
        ("model_version == null", True),
        ("model_version != null", False),
        ("null == model_version", True),
        ("null != model_version", False),
        ('model_version in ["x"]', False),
        ('model_version not in ["x"]', False),
        ('startswith(model_version, "")', False),
        ('contains(model_version, "")', False),
        ("startswith(model, model_version)", False),
        ("model_version == retry_of", False),
        ("model_version != retry_of", False),
        ("timing.ttft > 0", False),
        ("timing.ttft <= 0", False),
        ("timing.ttft + 1 > 0", False),
        ("-timing.ttft < 1", False),
        ("timing.ttft + 1 == null", True),
        ("timing.ttft * 0 != null", False),
        ("timing.ttft in [1, 2]", False),
        ("timing.ttft not in [1, 2]", False),
        ("timing.ttft < 5 or true", True),
        ('endpoint != "embeddings"', False),
        ('endpoint not in ["embeddings"]', False),
        ("endpoint == null", True),
        ('outcome.finish_reason == "stop"', False),
        ("outcome.finish_reason != null", False),
        ("quality_tier == null and prompt_hash == null and timing.e2e == null", True),
        ("(timing.ttft > 0) == (timing.ttft <= 0)", True),
    ],
)
def test_a_comparison_with_null_is_false_except_the_null_tests(evaluate: Evaluate, rule: str, expected: bool) -> None:
    assert evaluate(rule, [NULLS]) == [expected]


def test_the_null_tests_see_values(evaluate: Evaluate) -> None:
    assert evaluate("model_version == null or timing.ttft == null or endpoint == null", [BASE]) == [False]
    assert evaluate("model_version != null and timing.ttft != null and endpoint != null", [BASE]) == [True]


def test_a_non_nullable_field_compared_with_null_is_a_constant(evaluate: Evaluate) -> None:
    assert evaluate("tokens.prompt == null", [BASE, NULLS]) == [False, False]
    assert evaluate("model != null", [BASE, NULLS]) == [True, True]


def test_strings_keep_their_escapes(evaluate: Evaluate) -> None:
    odd = record(model='say "hi" \\ there', **{"dims.team": "it's"})

    assert evaluate(r'model == "say \"hi\" \\ there"', [odd, BASE]) == [True, False]
    assert evaluate('dims.team == "it\'s"', [odd, BASE]) == [True, False]


def test_sql_has_no_literal_in_its_text(evaluate: Evaluate) -> None:
    hostile = "x'); DROP TABLE rule_records; --"
    rule = f'model == "{hostile}" or dims.team in ["%s", "%%"] or tokens.prompt > 123456789'

    expression, params = compile_sql(parse_rule(rule), COLUMNS)
    sql = text(expression)

    assert hostile not in sql and "123456789" not in sql and "%%" not in sql
    assert hostile in params and "%s" in params and 123456789 in params
    assert evaluate(rule, [record(model=hostile), BASE]) == [True, False]


def test_enum_literals_are_compared_as_stored_codes() -> None:
    expression, params = compile_sql(
        parse_rule('outcome.status == "error" and endpoint in ["embeddings", "completions"]'), COLUMNS
    )

    sql = text(expression)
    assert '("t"."status") = %s' in sql and '("t"."endpoint") IN (%s, %s)' in sql
    assert params == [1, 4, 2]


def test_dims_wildcard_passes_the_name_as_a_parameter() -> None:
    expression, params = compile_sql(parse_rule('dims["cost-center"] == "r&d"'), COLUMNS)

    assert "cost-center" not in text(expression)
    assert params == ["cost-center", "r&d"]


def test_a_field_without_a_column_is_refused_with_its_position() -> None:
    with pytest.raises(RuleError, match="field `source` has no SQL column") as refused:
        compile_sql(parse_rule('true and source == "a"'), {"model": Column(col("t", "model"))})

    assert refused.value.column == 10


def test_a_label_the_codes_lack_matches_nothing(rule_records: None) -> None:
    schema = Schema({"colour": FieldSpec(Type(Kind.STR, nullable=True))})
    columns = {"colour": Column(SQL("NULLIF(t.attempt, 0)"), codes={"red": 1})}
    from .conftest import sql_answers

    def sql(rule: str) -> list[Any]:
        return sql_answers(*compile_sql(check(parse(rule), schema), columns), [BASE, record(attempt=0)])

    assert sql('colour == "red"') == [True, False]
    assert sql('colour == "blue"') == [False, False]
    assert sql('colour != "blue"') == [True, False]
    assert sql('colour in ["blue"]') == [False, False]
    assert sql('colour not in ["blue"]') == [True, False]
    assert sql('startswith(colour, "r")') == [True, False]


def test_the_schema_decides_the_fields() -> None:
    schema = Schema(
        {"cached": FieldSpec(BOOL), "maybe": FieldSpec(Type(Kind.BOOL, nullable=True)), "name": FieldSpec(STR)},
        prefixes={"dims": FieldSpec(STR)},
    )
    rows = {"cached": True, "maybe": None, "name": "x", "dims": {"a": "1"}}

    def answer(rule: str) -> bool:
        return compile_predicate(check(parse(rule), schema), dict_accessor)(rows)

    assert answer("cached and not (maybe == true)")
    assert answer('dims.a == "1" and dims.b == ""')
    with pytest.raises(RuleError, match="a nullable bool must be compared: write `maybe == true`"):
        check(parse("maybe or cached"), schema)
    with pytest.raises(RuleError, match=r"unknown field `tokens\.prompt`"):
        check(parse("tokens.prompt > 1"), schema)


def test_it_reads_a_decoded_record_v1() -> None:
    sent = factories.record(**{"dims.team": "cs-bot", "timing": None, "tokens.draft": 9, "quality_tier": "low"})
    decoded = msgspec.json.decode(json.dumps(sent), type=RecordV1)

    def accessor(path: str) -> Any:
        return (lambda r: "vllm-eu") if path == "source" else attribute_accessor(path)

    def answer(rule: str) -> bool:
        return compile_predicate(parse_rule(rule), accessor)(decoded)

    assert answer('source == "vllm-eu" and dims.team == "cs-bot" and dims.absent == ""')
    assert answer('tokens.draft == 9 and tokens.recomputed == 0 and attempt == 1 and quality_tier == "low"')
    assert answer('timing.ttft == null and outcome.status == "ok" and endpoint == "chat.completions"')
    assert not answer("timing.e2e >= 0")


def test_compiling_an_unchecked_tree_is_refused() -> None:
    with pytest.raises(ValueError, match="check"):
        compile_predicate(parse("true"), dict_accessor)
    with pytest.raises(ValueError, match="check"):
        compile_sql(parse("true"), COLUMNS)
