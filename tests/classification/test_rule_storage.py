"""Rules over the stored records: record_columns() against ingest_record and its reference tables
gives the same answers as the predicate over the records as decoded at ingest."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from django.db import connection
from django.test import Client

from apps.classification.rules import attribute_accessor, compile_predicate, compile_sql, parse_rule
from apps.classification.rules.storage import RECORD_FROM, record_columns
from apps.common.composed import SQL, text
from apps.ingest.contract import RecordV1
from tests import factories
from tests.conftest import Collector

RULES = [
    'outcome.status == "ok" and tokens.prompt > 1000',
    'endpoint in ["embeddings", "responses"] or endpoint == null',
    'dims.team == "cs-bot" and dims["cost-center"] == ""',
    'dims["cost-center"] == "r&d"',
    "model_version == null",
    'model_version == "awq-int4"',
    'startswith(model, "qwen") and not (quality_tier == "low")',
    'prompt_hash == "9f86d081884c7d659a2feaa0c55ad015"',
    "timing.ttft + timing.decode > 1000 or timing.e2e == null",
    'outcome.finish_reason not in ["stop"]',
    "tokens.prompt - tokens.prompt_cached >= tokens.completion * 4",
    "attempt > 1 and retry_of != null",
    'source == "rules-source"',
]


@pytest.fixture
def stored(db: None, client: Client) -> list[RecordV1]:
    key = factories.collector_key("rules-source")
    sent = [
        factories.record(),
        factories.record(
            endpoint="embeddings",
            model_version=factories.DELETE,
            quality_tier="low",
            timing=factories.DELETE,
            prompt_hash=factories.DELETE,
            **{"dims.cost-center": "r&d", "tokens.completion": 0, "outcome.finish_reason": factories.DELETE},
        ),
        factories.record(
            model="llama-3.1-70b",
            attempt=2,
            retry_of="chatcmpl-x",
            endpoint=factories.DELETE,
            **{"outcome.status": "error", "outcome.finish_reason": "error", "tokens.prompt": 50, "dims.team": "x"},
        ),
    ]
    sent[2]["tokens"].update(prompt_cached=0, system=0, tool=0)
    response = Collector(client, key.secret).send(sent)
    assert response.json()["accepted"] == 3, response.json()
    return [msgspec.json.decode(json.dumps(data), type=RecordV1) for data in sent]


def _accessor(path: str) -> Any:
    return (lambda record: "rules-source") if path == "source" else attribute_accessor(path)


@pytest.mark.parametrize("rule", RULES)
def test_stored_records_answer_as_at_ingest(stored: list[RecordV1], rule: str) -> None:
    tree = parse_rule(rule)
    expected = {record.record_id: compile_predicate(tree, _accessor)(record) for record in stored}
    expression, params = compile_sql(tree, record_columns())

    with connection.cursor() as cursor:
        cursor.execute(text(SQL("SELECT r.record_id, {} FROM {}").format(expression, RECORD_FROM)), params)
        found = dict(cursor.fetchall())

    assert found == expected
