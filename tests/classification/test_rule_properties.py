"""Properties: for random well-typed rules and random records, the Python predicate and the SQL
expression agree (over plain dicts and a flat table, and as the product runs them: the predicate
at ingest over the decoded record, the SQL over the stored records through the product's own
column mapping); for any text at all, parsing either succeeds or raises RuleError, quickly."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from django.db import connection
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.classification.rules import (
    RECORD_SCHEMA,
    RuleError,
    attribute_accessor,
    check,
    compile_predicate,
    compile_sql,
    dict_accessor,
    parse,
    parse_rule,
)
from apps.classification.rules.storage import RECORD_FROM, record_columns
from apps.common.composed import SQL, text
from apps.ingest.contract import ENDPOINTS, FINISH_REASONS, QUALITY_TIERS, STATUSES, RecordV1, record_problems
from apps.ingest.models import TIMING_FIELDS, TOKEN_FIELDS
from tests import factories

from .conftest import COLUMNS, record, sql_answers
from .helpers import store

HASHES = ["9f86d081884c7d65", "00000000000000000000"]  # prompt hashes as the contract takes them
WORDS = ["", "a", "ab", "b", "qwen", "Qwen", 'q"x', "back\\slash", "é", "ab%", "_", "%s", *HASHES]
STR_FIELDS = ["record_id", "source", "model", "model_version", "retry_of", "prompt_hash"]
DIM_FIELDS = ["dims.team", "dims.feature", 'dims["cost-center"]', "dims.absent"]
ENUM_FIELDS = {
    "endpoint": ENDPOINTS,
    "quality_tier": QUALITY_TIERS,
    "outcome.status": STATUSES,
    "outcome.finish_reason": FINISH_REASONS,
}
INT_FIELDS = ["attempt", *(f"tokens.{n}" for n in TOKEN_FIELDS), *(f"timing.{n}" for n in TIMING_FIELDS)]
NULLABLE = ["model_version", "retry_of", "prompt_hash", "endpoint", "quality_tier", "outcome.finish_reason"]
NULLABLE += [f"timing.{n}" for n in TIMING_FIELDS]
COMPARISONS = ["==", "!=", "<", "<=", ">", ">="]


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def listed(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


int_literals = st.one_of(st.integers(-3, 6), st.sampled_from([10**9, 2**63 - 1])).map(str)
word_literals = st.sampled_from(WORDS).map(quoted)
int_exprs = st.recursive(
    st.one_of(st.sampled_from(INT_FIELDS), int_literals),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from("+-*"), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda e: f"-({e})"),
    ),
    max_leaves=4,
)
# An enumerated field meets only other fields: a literal it can never hold is refused by check.
str_values = st.one_of(st.sampled_from(STR_FIELDS + DIM_FIELDS), word_literals)
str_fields = st.sampled_from(STR_FIELDS + DIM_FIELDS + list(ENUM_FIELDS))
str_exprs = st.one_of(str_values, str_fields)
membership = st.sampled_from(["in", "not in"])


@st.composite
def enum_tests(draw: Any) -> str:
    field = draw(st.sampled_from(sorted(ENUM_FIELDS)))
    values = [quoted(v) for v in draw(st.lists(st.sampled_from(ENUM_FIELDS[field]), min_size=1, max_size=3))]
    if draw(st.booleans()):
        return f"{field} {draw(st.sampled_from(['==', '!=']))} {values[0]}"
    return f"{field} {draw(membership)} {listed(values)}"


@st.composite
def null_tests(draw: Any) -> str:
    field, op = draw(st.sampled_from(NULLABLE)), draw(st.sampled_from(["==", "!="]))
    return f"null {op} {field}" if draw(st.booleans()) else f"{field} {op} null"


conditions = st.one_of(
    st.tuples(int_exprs, st.sampled_from(COMPARISONS), int_exprs).map(" ".join),
    st.tuples(str_values, st.sampled_from(["==", "!="]), str_values).map(" ".join),
    st.tuples(str_fields, st.sampled_from(["==", "!="]), str_fields).map(" ".join),
    st.tuples(int_exprs, membership, st.lists(int_literals, min_size=1, max_size=3).map(listed)).map(" ".join),
    st.tuples(str_values, membership, st.lists(word_literals, min_size=1, max_size=3).map(listed)).map(" ".join),
    st.tuples(st.sampled_from(["startswith", "contains"]), str_exprs, str_exprs).map(
        lambda t: f"{t[0]}({t[1]}, {t[2]})"
    ),
    enum_tests(),
    null_tests(),
    st.sampled_from(["true", "false"]),
    # The reasoning overspend rule with its N (docs/classification.md): reasoning over N x the answer.
    st.integers(0, 6).map(lambda n: f"tokens.reasoning > {n} * (tokens.completion - tokens.reasoning)"),
)
rules = st.recursive(
    conditions,
    lambda inner: st.one_of(
        inner.map(lambda r: f"not ({r})"),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join),
        st.tuples(inner, st.sampled_from(["==", "!="]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        inner.map(lambda r: f"({r})"),
    ),
    max_leaves=6,
)

counts = st.one_of(st.integers(0, 6), st.just(10**9))
maybe_word = st.one_of(st.none(), st.sampled_from(WORDS))


@st.composite
def records(draw: Any) -> dict[str, Any]:
    def maybe(choices: tuple[str, ...]) -> str | None:
        return draw(st.one_of(st.none(), st.sampled_from(choices)))

    timing = draw(st.one_of(st.none(), st.fixed_dictionaries({}, optional=dict.fromkeys(TIMING_FIELDS, counts))))
    dims = draw(st.dictionaries(st.sampled_from(["team", "feature", "cost-center"]), st.sampled_from(WORDS)))
    return record(
        record_id=draw(st.sampled_from(WORDS)),
        source=draw(st.sampled_from(WORDS)),
        model=draw(st.sampled_from(WORDS)),
        model_version=draw(maybe_word),
        retry_of=draw(maybe_word),
        prompt_hash=draw(maybe_word),
        attempt=draw(st.integers(1, 4)),
        endpoint=maybe(ENDPOINTS),
        quality_tier=maybe(QUALITY_TIERS),
        outcome={"status": draw(st.sampled_from(STATUSES)), "finish_reason": maybe(FINISH_REASONS)},
        tokens={name: draw(counts) for name in TOKEN_FIELDS},
        timing=timing,
        dims=dims,
    )


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rule=rules, batch=st.lists(records(), min_size=1, max_size=6))
def test_python_and_sql_agree_on_random_rules_and_records(rule_records: None, rule: str, batch: list[dict]) -> None:
    tree = parse_rule(rule)
    predicate = compile_predicate(tree, dict_accessor)
    in_python = [predicate(data) for data in batch]
    in_sql = sql_answers(*compile_sql(tree, COLUMNS), batch)

    assert all(type(answer) is bool for answer in in_python + in_sql)
    assert in_python == in_sql
    event("matches: " + ("all" if all(in_python) else "some" if any(in_python) else "none"))


# --- as the product runs them -------------------------------------------------------------
# At ingest a move rule's predicate reads the decoded record (RecordV1) with the source's name
# (classification's classifier); reclassify and the rule preview read the stored records through
# record_columns over RECORD_FROM. The records go in through ingest's own store.

NAMES = [word for word in WORDS if word]  # a record id, model and source name are never empty


def _capped(tokens: dict[str, int]) -> dict[str, int]:
    """The same counts made to hold together as the contract wants (parts within their whole)."""
    t = dict(tokens)
    t["prompt_cached"] = min(t["prompt_cached"], t["prompt"])
    t["prompt_cache_write"] = min(t["prompt_cache_write"], t["prompt"] - t["prompt_cached"])
    t["system"] = min(t["system"], t["prompt"])
    t["tool"] = min(t["tool"], t["prompt"] - t["system"])
    t["reasoning"] = min(t["reasoning"], t["completion"])
    t["structural"] = min(t["structural"], t["completion"] - t["reasoning"])
    t["draft_accepted"] = min(t["draft_accepted"], t["draft"])
    return t


@st.composite
def valid_records(draw: Any) -> dict[str, Any]:
    """A record the ingest contract accepts, as the JSON a collector sends (no source)."""
    data = draw(records())
    del data["source"]
    data["record_id"], data["model"] = draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMES))
    data["retry_of"] = draw(st.one_of(st.none(), st.sampled_from(NAMES)))
    data["prompt_hash"] = draw(st.one_of(st.none(), st.sampled_from(HASHES)))
    data["tokens"] = _capped(data["tokens"])
    return data


def ingest_accessor(source: str) -> Any:
    """The classifier's accessor at ingest: the record's attributes, and the batch's source."""
    return lambda path: (lambda record: source) if path == "source" else attribute_accessor(path)


@pytest.fixture
def sources(db: None) -> dict[str, int]:
    return {name: factories.collector_key(name).key.pk for name in NAMES}


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rule=rules,
    source=st.sampled_from(NAMES),
    batch=st.lists(valid_records(), min_size=1, max_size=6, unique_by=lambda data: data["record_id"]),
)
def test_python_at_ingest_and_sql_over_the_stored_records_agree(
    sources: dict[str, int], rule: str, source: str, batch: list[dict[str, Any]]
) -> None:
    in_python, in_sql = at_ingest_and_stored(sources, rule, source, batch)

    assert all(type(answer) is bool for answer in in_python + in_sql)
    assert in_python == in_sql, f"{rule!r}: at ingest {in_python} != stored {in_sql}"
    event("matches: " + ("all" if all(in_python) else "some" if any(in_python) else "none"))


def test_a_model_version_sent_empty_is_null_at_ingest_as_it_is_stored(sources: dict[str, int]) -> None:
    batch = [record(record_id=name, model_version=version) for name, version in [("a", ""), ("b", None), ("c", "x")]]
    for data in batch:
        del data["source"]
    rule = "model_version == null"

    assert at_ingest_and_stored(sources, rule, "a", batch) == ([True, True, False], [True, True, False])


def at_ingest_and_stored(
    sources: dict[str, int], rule: str, source: str, batch: list[dict[str, Any]]
) -> tuple[list[bool], list[bool]]:
    """The rule's answer for each record of a batch from `source`: at ingest (the predicate over
    the decoded records) and over the records as ingest stored them (SQL through record_columns)."""
    tree = parse_rule(rule)
    now = datetime.now(UTC)
    for n, data in enumerate(batch):  # one second apart, so the stored order is the batch's
        data["ts"] = (now - timedelta(minutes=10) + timedelta(seconds=n)).isoformat()
    typed = [msgspec.convert(data, RecordV1, strict=False) for data in batch]
    problems = [found for r in typed if (found := record_problems(r, now=now, max_age=timedelta(days=1)))]
    assert not problems, problems
    predicate = compile_predicate(tree, ingest_accessor(source))
    in_python = [predicate(r) for r in typed]

    source_id = sources[source]
    store(source_id, batch)
    expression, params = compile_sql(tree, record_columns())
    statement = SQL("SELECT {} FROM {} WHERE r.source_id = %s ORDER BY r.ts").format(expression, RECORD_FROM)
    with connection.cursor() as cursor:
        cursor.execute(text(statement), [*params, source_id])
        in_sql = [answer for (answer,) in cursor.fetchall()]
        cursor.execute("DELETE FROM ingest_record WHERE source_id = %s", [source_id])  # a clean slate for the next
    assert len(in_sql) == len(batch), "not every record was stored"
    return in_python, in_sql


VOCABULARY = [
    *"()[],+-*",
    *COMPARISONS,
    "=",
    "!",
    "and",
    "or",
    "not",
    "in",
    "true",
    "false",
    "null",
    "1",
    "-2",
    "9223372036854775808",
    '"a"',
    '"ok"',
    '"',
    '"\\"',
    "\\",
    "\n",
    "model",
    "model_version",
    "tokens.prompt",
    "timing.ttft",
    "endpoint",
    "outcome.status",
    "dims.team",
    "dims",
    'dims["x"]',
    "startswith",
    "contains",
    "tokens.",
    ".",
]


def _exercise(text: str) -> None:
    try:
        tree = check(parse(text), RECORD_SCHEMA)
    except RuleError as refused:
        assert 0 <= refused.offset <= len(text)
        assert refused.line >= 1 and refused.column >= 1
        event("refused")
        return
    event("accepted")
    assert type(compile_predicate(tree, dict_accessor)(record())) is bool
    expression, params = compile_sql(tree, COLUMNS)
    assert expression.as_string(None).count("%s") == len(params)


@settings(max_examples=1500)
@given(text=st.text(max_size=300))
def test_arbitrary_text_either_parses_or_raises_rule_error(text: str) -> None:
    _exercise(text)


@settings(max_examples=1500)
@given(words=st.lists(st.sampled_from(VOCABULARY), max_size=40), glue=st.sampled_from([" ", ""]))
def test_token_soup_either_parses_or_raises_rule_error(words: list[str], glue: str) -> None:
    _exercise(glue.join(words))


@st.composite
def edited_rules(draw: Any) -> str:
    """A well-typed rule with one random edit: text cut out, a word put in, or a slice repeated."""
    rule = draw(rules)
    start = draw(st.integers(0, len(rule)))
    end = draw(st.integers(start, min(len(rule), start + 8)))
    edit = draw(st.sampled_from(["cut", "insert", "repeat"]))
    if edit == "cut":
        return rule[:start] + rule[end:]
    middle = draw(st.sampled_from(VOCABULARY)) if edit == "insert" else rule[start:end] * 2
    return rule[:start] + middle + rule[end:]


@settings(max_examples=1500)
@given(text=edited_rules())
def test_edited_rules_either_parse_or_raise_rule_error(text: str) -> None:
    _exercise(text)


# "Quickly" is read on the processor time the parse itself used, not on the wall clock: the suite
# shares two cores with servers, engines and browsers, and a wall-clock deadline failed a rule of
# a few characters (about 2 ms of work) at 422 ms on that load. A parse that backtracks or goes
# quadratic on 2,000 characters costs seconds of processor time whatever the load; a linear one
# costs about 8 ms here.
HOSTILE_CPU_SECONDS = 0.5


@settings(max_examples=300)
@given(text=st.text(alphabet=st.sampled_from('(-"\\ n[ot'), min_size=1500, max_size=2100))
def test_long_hostile_text_is_refused_quickly(text: str) -> None:
    started = time.process_time()
    _exercise(text)
    used = time.process_time() - started
    assert used < HOSTILE_CPU_SECONDS, f"{used:.3f} s of processor time on {len(text)} characters"
