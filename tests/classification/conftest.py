"""Records as dicts, a PostgreSQL table that holds them the way ingest stores enums (smallint
codes), and `evaluate`: a rule's answer for each record, by the Python predicate and by SQL,
asserted to agree."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from apps.classification.rules import Column, compile_predicate, compile_sql, dict_accessor, parse_rule
from apps.classification.rules.storage import choice_codes
from apps.common.composed import PARAM, SQL, Composable, col, text
from apps.ingest.models import TIMING_FIELDS, TOKEN_FIELDS, Endpoint, FinishReason, QualityTier, Status

ENUMS = {
    "endpoint": ("endpoint", choice_codes(Endpoint.choices)),
    "quality_tier": ("quality_tier", choice_codes(QualityTier.choices)),
    "outcome.status": ("status", choice_codes(Status.choices)),
    "outcome.finish_reason": ("finish_reason", choice_codes(FinishReason.choices)),
}
PLAIN = ("record_id", "source", "model", "model_version", "attempt", "retry_of", "prompt_hash")
COLUMNS: dict[str, Column] = {
    **{name: Column(col("t", name)) for name in PLAIN},
    **{path: Column(col("t", column), codes) for path, (column, codes) in ENUMS.items()},
    **{f"tokens.{name}": Column(col("t", name)) for name in TOKEN_FIELDS},
    **{f"timing.{name}": Column(col("t", name)) for name in TIMING_FIELDS},
    "dims.*": Column(SQL("COALESCE(t.dims ->> CAST({} AS text), '')").format(PARAM)),
}
_TABLE = f"""
    CREATE TEMPORARY TABLE rule_records (
        id int PRIMARY KEY, record_id text NOT NULL, source text NOT NULL, model text NOT NULL,
        model_version text, attempt smallint NOT NULL, retry_of text, prompt_hash text,
        endpoint smallint, quality_tier smallint, status smallint NOT NULL, finish_reason smallint,
        {", ".join(f"{name} integer NOT NULL" for name in TOKEN_FIELDS)},
        {", ".join(f"{name} integer" for name in TIMING_FIELDS)},
        dims jsonb NOT NULL
    )"""
_ORDER = [*PLAIN, *(column for column, _ in ENUMS.values()), *TOKEN_FIELDS, *TIMING_FIELDS]


def record(**overrides: Any) -> dict[str, Any]:
    """A record as a nested dict (the shape dict_accessor reads); dotted keys reach inside."""
    data: dict[str, Any] = {
        "record_id": "chatcmpl-1",
        "source": "vllm-eu",
        "model": "qwen2.5-7b-instruct",
        "model_version": "awq-int4",
        "endpoint": "chat.completions",
        "attempt": 1,
        "retry_of": None,
        "quality_tier": None,
        "prompt_hash": "9f86d081884c7d65",
        "outcome": {"status": "ok", "finish_reason": "stop"},
        "tokens": dict.fromkeys(TOKEN_FIELDS, 0) | {"prompt": 1200, "prompt_cached": 512, "completion": 180},
        "timing": {"queued": 3, "ttft": 120, "prefill": 90, "decode": 800, "e2e": 930},
        "dims": {"team": "cs-bot", "feature": "faq"},
    }
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        target = data
        for part in parents:
            target = target[part]
        target[leaf] = value
    return data


def _row(index: int, data: dict[str, Any]) -> list[Any]:
    flat = {name: data[name] for name in PLAIN}
    for path, (column, codes) in ENUMS.items():
        *parent, leaf = path.split(".")
        label = (data[parent[0]] if parent else data)[leaf]
        flat[column] = None if label is None else codes[label]
    flat |= data["tokens"]
    timing = data["timing"] or {}
    flat |= {name: timing.get(name) for name in TIMING_FIELDS}
    return [index, *(flat[name] for name in _ORDER), json.dumps(data["dims"])]


def sql_answers(expression: Composable, params: list[object], records: list[dict[str, Any]]) -> list[Any]:
    """The SQL expression's value for each record, in a savepoint (an error spoils nothing else)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM rule_records")
        placeholders = ", ".join(["%s"] * (len(_ORDER) + 1))
        cursor.executemany(
            f"INSERT INTO rule_records (id, {', '.join(_ORDER)}, dims) VALUES ({placeholders}, %s::jsonb)",
            [_row(index, data) for index, data in enumerate(records)],
        )
        cursor.execute(text(SQL("SELECT {} FROM rule_records AS t ORDER BY t.id").format(expression)), params)
        return [answer for (answer,) in cursor.fetchall()]


Evaluate = Callable[[str, list[dict[str, Any]]], list[bool]]


@pytest.fixture
def rule_records(db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(_TABLE)
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS rule_records")


@pytest.fixture
def evaluate(rule_records: None) -> Evaluate:
    """The answers of `rule` for `records`, after checking that Python and SQL give the same ones."""

    def answers(rule: str, records: list[dict[str, Any]]) -> list[bool]:
        tree = parse_rule(rule)
        predicate = compile_predicate(tree, dict_accessor)
        in_python = [predicate(data) for data in records]
        in_sql = sql_answers(*compile_sql(tree, COLUMNS), records)
        assert all(type(answer) is bool for answer in in_python + in_sql), (in_python, in_sql)
        assert in_python == in_sql, f"{rule!r}: python {in_python} != sql {in_sql}"
        return in_python

    return answers
