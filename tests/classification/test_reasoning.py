"""Reasoning tokens through the record API: validated as a part of completion, stored, classified
(effective.reasoning, wasted with the completion, waste.reasoning_overspend by a move rule with
its N) and priced (as output, or at the book's reasoning price)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from apps.classification.models import HourlyClass
from apps.ingest.models import HourlyUsage, Record, Rejection
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.classification.helpers import ruleset_activated
from tests.factories import record

T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
M = 1_000_000
# A rule set's own N: reasoning over 4x the answer (the rest of the completion) is overspent.
OVERSPEND = "tokens.reasoning > 4 * (tokens.completion - tokens.reasoning)"


def thinking(completion: int, reasoning: int | None, **overrides) -> dict:
    tokens = {"prompt": 1000, "completion": completion}
    if reasoning is not None:
        tokens["reasoning"] = reasoning
    return record(ts=T0.isoformat(), prompt_hash=None, tokens=tokens, **overrides)


def classes() -> dict[tuple[str, str], int]:
    rows = HourlyClass.objects.values("reason__name", "component").annotate(n=Sum("tokens"))
    return {(row["reason__name"], str(row["component"])): row["n"] for row in rows if row["n"]}


def by_reason() -> dict[str, int]:
    rows = HourlyClass.objects.values("reason__name").annotate(n=Sum("tokens"))
    return {row["reason__name"]: row["n"] for row in rows if row["n"]}


def test_reasoning_is_stored_and_classed_effective_reasoning_beside_the_answer(collector, reader):
    result = collector.send([thinking(500, 420)]).json()

    assert result["accepted"] == 1
    assert Record.objects.get().reasoning == 420
    assert HourlyUsage.objects.get().reasoning == 420
    assert by_reason() == {"effective.input": 1000, "effective.output": 80, "effective.reasoning": 420}
    assert classes()[("effective.reasoning", "7")] == 420  # the eighth component
    [listed] = reader.get("/api/v1/records").json()["results"]
    assert (listed["tokens"]["completion"], listed["tokens"]["reasoning"]) == (500, 420)


def test_a_record_without_reasoning_stays_valid_and_means_none(collector):
    result = collector.send([thinking(500, None)]).json()

    assert (result["accepted"], result["rejected"]) == (1, [])
    assert Record.objects.get().reasoning == 0
    assert by_reason() == {"effective.input": 1000, "effective.output": 500}


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ({"completion": 100, "reasoning": 101}, "must be <= tokens.completion (reasoning is part of completion)"),
        (
            {"completion": 100, "reasoning": 60, "structural": 41},
            "tokens.structural + tokens.reasoning must be <= tokens.completion",
        ),
    ],
)
def test_reasoning_beyond_the_completion_is_rejected_with_its_reason(collector, tokens, message):
    bad = record(tokens={"prompt": 10, **tokens})

    result = collector.send([thinking(100, 100), bad]).json()

    assert result["accepted"] == 1
    [rejected] = result["rejected"]
    assert rejected["index"] == 1
    assert rejected["errors"]["tokens.reasoning"][0].startswith(message)
    kept = Rejection.objects.get()  # the dead letter keeps the record and why
    assert kept.record_id == bad["record_id"]
    assert "tokens.reasoning" in kept.errors


def test_a_truncated_or_failed_answer_wastes_its_reasoning_with_it(collector):
    collector.send(
        [
            thinking(300, 250, **{"outcome.finish_reason": "length"}),
            thinking(200, 150, **{"outcome.status": "timeout", "outcome.finish_reason": None}),
        ]
    )

    assert by_reason() == {"effective.input": 1000, "waste.truncated": 300, "waste.timeout": 1200}


def test_overspend_fires_above_n_times_the_answer_and_not_at_it(collector):
    ruleset_activated(moves=[(OVERSPEND, "reasoning", "waste.reasoning_overspend")])

    collector.send(
        [
            thinking(50, 40),  # answer 10, reasoning exactly 4x: not over
            thinking(51, 41),  # answer 10, reasoning 41 > 40: over
            thinking(0, 0),  # no completion at all: 0 > 0 is false
        ]
    )

    assert by_reason() == {
        "effective.input": 3000,
        "effective.output": 20,
        "effective.reasoning": 40,
        "waste.reasoning_overspend": 41,
    }


@pytest.mark.django_db(transaction=False)
def test_reasoning_is_priced_as_output_unless_the_book_sets_a_reasoning_price(collector):
    qwen = "qwen2.5-7b-instruct"
    factories.price_version(effective_from=T0 - timedelta(days=1), prices={qwen: ("2", "0.5", "6")})
    collector.send([thinking(M + 1000, M)])
    hours_price(start=T0, end=T0 + timedelta(hours=1))
    as_output = dict(HourlyCost.objects.values_list("component", "cost"))
    assert as_output[7] == Decimal(6)  # a million reasoning tokens at the output price
    assert as_output[3] == Decimal("0.006")

    price_set(model_pattern=qwen, prices={"reasoning": Decimal("9")}, effective_from=T0)
    hours_price(start=T0, end=T0 + timedelta(hours=1))

    repriced = dict(HourlyCost.objects.values_list("component", "cost"))
    assert repriced[7] == Decimal(9)
    assert repriced[3] == Decimal("0.006")  # the answer keeps the output price
