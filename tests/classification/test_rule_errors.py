"""Refusals: each with its message and the exact place (1-based line and column, 0-based offset)."""

from __future__ import annotations

import pytest

from apps.classification.rules import RuleError, parse, parse_rule

# (id, rule, part of the message, line, column)
REFUSALS = [
    ("ordering_on_strings", 'model < "b"', "strings cannot be ordered with `<`", 1, 7),
    ("ordering_on_bools", "true >= false", "bools cannot be ordered with `>=`", 1, 6),
    ("str_compared_with_int", 'tokens.prompt == "5"', "cannot compare an int with a str", 1, 15),
    ("int_compared_with_str", "1 != model", "cannot compare an int with a str", 1, 3),
    ("arithmetic_on_strings", "model + 1 > 2", "arithmetic needs ints, but this is a str", 1, 1),
    ("arithmetic_on_strings_right", 'tokens.prompt * "a" > 1', "arithmetic needs ints, but this is a str", 1, 17),
    ("negating_a_string", '-model == "a"', "`-` needs ints, but this is a str", 1, 2),
    ("mixed_list", 'tokens.prompt in [1, "a"]', "the list mixes an int and a str", 1, 22),
    ("list_of_other_type", 'tokens.prompt in ["a"]', "cannot look for an int in a list of strings", 1, 15),
    ("null_in_list", 'model in ["a", null]', "a list cannot hold null", 1, 16),
    ("empty_list", "model in []", "a list needs at least one value", 1, 11),
    ("expression_in_list", "tokens.prompt in [attempt]", "a list holds only literal values", 1, 19),
    ("non_boolean_rule", "tokens.prompt + 1", "a rule must be a condition (true or false), but this is an int", 1, 1),
    ("bare_string_rule", '"yes"', "a rule must be a condition", 1, 1),
    ("non_boolean_and", 'model == "a" and 5', "`and` needs a condition on each side, but this is an int", 1, 18),
    ("non_boolean_or", "dims.team or true", "`or` needs a condition on each side, but this is a str", 1, 1),
    ("not_of_a_comparison_operand", "not tokens.prompt > 5", "`not` needs a condition, but this is an int", 1, 5),
    ("unknown_field", "tokens.promt > 1", "unknown field `tokens.promt`; did you mean `tokens.prompt`?", 1, 1),
    ("unknown_top_field", 'colour == "red"', "unknown field `colour`", 1, 1),
    ("bare_prefix", 'dims == "x"', "unknown field `dims`", 1, 1),
    ("unknown_enum_value", 'endpoint == "chat"', '"chat" is never a value of `endpoint`', 1, 13),
    ("unknown_enum_value_in_list", 'outcome.status in ["ok", "eror"]', '"eror" is never a value', 1, 26),
    ("null_compared_with_null", "null == null", "comparing null with null tests nothing", 1, 6),
    ("ordering_against_null", "timing.ttft < null", "null can only be compared with `==` or `!=`", 1, 13),
    ("unknown_function", 'lower(model) == "a"', "unknown function `lower`; known: contains, startswith", 1, 1),
    ("wrong_arity", "startswith(model)", "`startswith` takes 2 arguments, not 1", 1, 1),
    ("int_argument", 'startswith(tokens.prompt, "a")', "argument 1 of `startswith` must be a str, not an int", 1, 12),
    ("null_argument", "contains(model, null)", "argument 2 of `contains` must be a str, not null", 1, 17),
    ("unexpected_end", "tokens.prompt > ", "expected a value, found the end of the rule", 1, 17),
    ("unexpected_token", "tokens.prompt > )", "expected a value, found `)`", 1, 17),
    ("trailing_input", 'model == "a" model', "unexpected `model` after a complete rule", 1, 14),
    ("unclosed_parenthesis", '(model == "a"', "expected `)` to close the `(` at line 1, column 1", 1, 14),
    ("unclosed_list", "attempt in [1, 2", "expected `]` to close the list, found the end of the rule", 1, 17),
    ("unterminated_string", 'model == "abc', "unterminated string", 1, 10),
    ("string_across_lines", 'model == "a\n" or true', "unterminated string", 1, 10),
    ("unknown_escape", r'model == "a\n"', "unknown escape in string", 1, 12),
    ("single_equals", 'model = "x"', "unexpected character '=' ; compare with `==`".replace(" ;", ";"), 1, 7),
    ("stray_character", "model @ 1", "unexpected character '@'", 1, 7),
    ("chained_comparison", "1 < attempt < 3", "comparisons cannot be chained; join them with `and`", 1, 13),
    ("not_without_in", 'model not "a"', 'expected `in` after `not`, found `"a"`', 1, 11),
    ("huge_integer", "tokens.prompt < 99999999999999999999", "integer literal is too large", 1, 17),
    ("empty_bracket_name", 'dims[""] == "a"', "a field name cannot be empty", 1, 6),
    ("empty_rule", "", "expected a value, found the end of the rule", 1, 1),
    ("nul_in_string", 'model == "a\x00"', "a string cannot hold the NUL character", 1, 12),
    ("lone_surrogate", 'model == "\ud800"', "not valid Unicode", 1, 11),
    ("type_error_on_a_later_line", 'outcome.status == "ok"\n  and tokens.prompt >= "x"', "cannot compare", 2, 21),
    ("parse_error_on_a_later_line", "true and\n\n   (attempt == ]", "expected a value, found `]`", 3, 16),
]


@pytest.mark.parametrize(("rule", "message", "line", "column"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_it_refuses(rule: str, message: str, line: int, column: int) -> None:
    with pytest.raises(RuleError) as refused:
        parse_rule(rule)

    assert message in refused.value.message
    assert (refused.value.line, refused.value.column) == (line, column)
    lines = rule.split("\n")
    assert refused.value.offset == sum(len(text) + 1 for text in lines[: line - 1]) + column - 1
    assert f"(line {line}, column {column})" in str(refused.value)


def test_it_refuses_ordering_on_strings() -> None:
    with pytest.raises(RuleError, match="strings cannot be ordered") as refused:
        parse_rule('dims.team >= "m"')

    assert (refused.value.line, refused.value.column, refused.value.offset) == (1, 11, 10)


def test_it_refuses_a_rule_longer_than_2000_characters() -> None:
    rule = "true or " * 250 + "true"

    with pytest.raises(RuleError, match="at most 2000 characters") as refused:
        parse(rule)

    assert refused.value.offset == 2000


def test_it_accepts_a_rule_of_exactly_2000_characters() -> None:
    rule = "true or " * 249 + "true" + " " * (2000 - 249 * 8 - 4)

    assert len(rule) == 2000
    parse_rule(rule)


@pytest.mark.parametrize(
    ("opening", "closing"),
    [("(", ")"), ("not ", ""), ("-", ""), ('contains(model, "a") and (', ")")],
    ids=["parentheses", "not", "minus", "after-a-call"],
)
def test_it_refuses_nesting_deeper_than_32(opening: str, closing: str) -> None:
    def nested(depth: int) -> str:
        return opening * depth + "attempt == 1" + closing * depth if opening != "-" else "-" * depth + "1 == 1"

    parse(nested(32))
    with pytest.raises(RuleError, match="nests deeper than 32 levels"):
        parse(nested(33))


def test_it_refuses_hostile_nesting_quickly() -> None:
    for rule in ("(" * 1999, "not " * 499, "-" * 1999 + "1", "[" * 1999, "contains(" * 200):
        with pytest.raises(RuleError):
            parse(rule)
