"""Prompt-cache writes through the record API: validated as a part of the prompt beside the cache
reads, stored, classified (effective.cache_write, the cache-write component; wasted with the
prompt when the request is) and priced (as input, or at the book's cache-write price)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from apps.classification.engine import CACHE_WRITE, COMPONENTS, UNCACHED
from apps.classification.models import HourlyClass
from apps.ingest.models import HourlyUsage, Record, Rejection
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.factories import record

T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
M = 1_000_000


def writing(prompt: int, cached: int, written: int | None, **overrides) -> dict:
    tokens = {"prompt": prompt, "prompt_cached": cached, "completion": 100}
    if written is not None:
        tokens["prompt_cache_write"] = written
    return record(**{"ts": T0.isoformat(), "prompt_hash": None, "tokens": tokens, **overrides})


def by_reason() -> dict[str, int]:
    rows = HourlyClass.objects.values("reason__name").annotate(n=Sum("tokens"))
    return {row["reason__name"]: row["n"] for row in rows if row["n"]}


def test_cache_writes_are_stored_and_classed_effective_cache_write_apart_from_hits_and_input(collector, reader):
    result = collector.send([writing(1000, 300, 600)]).json()

    assert result["accepted"] == 1
    assert Record.objects.get().prompt_cache_write == 600
    assert HourlyUsage.objects.get().prompt_cache_write == 600
    assert by_reason() == {
        "cache.prefix_cache": 300,
        "effective.input": 100,  # the prompt neither read from nor written to the cache
        "effective.cache_write": 600,
        "effective.output": 100,
    }
    components = dict(HourlyClass.objects.values_list("component").annotate(n=Sum("tokens")))
    assert (components[CACHE_WRITE], components[UNCACHED]) == (600, 100)
    assert COMPONENTS[CACHE_WRITE] == "cache_write"
    [listed] = reader.get("/api/v1/records").json()["results"]
    assert (listed["tokens"]["prompt"], listed["tokens"]["prompt_cache_write"]) == (1000, 600)


def test_usage_by_component_names_the_kind_of_cache_writes_cache_write(collector, reader):
    collector.send([writing(1000, 300, 600)])

    window = {"from": T0.isoformat(), "to": (T0 + timedelta(hours=1)).isoformat(), "group_by": "component"}
    rows = reader.get("/api/v1/usage/classes", window).json()["rows"]
    kinds = {row["component"]: (row["kind"], row["tokens"]) for row in rows}
    assert kinds["cache_write"] == ("cache_write", 600)
    assert kinds["cached_prompt"] == ("cached_input", 300)
    assert kinds["uncached_prompt"] == ("input", 100)


def test_a_record_without_cache_writes_stays_valid_and_means_none(collector):
    result = collector.send([writing(1000, 300, None)]).json()

    assert (result["accepted"], result["rejected"]) == (1, [])
    assert Record.objects.get().prompt_cache_write == 0
    assert by_reason() == {"cache.prefix_cache": 300, "effective.input": 700, "effective.output": 100}


def test_cache_reads_and_writes_beyond_the_prompt_are_rejected_with_their_reason(collector):
    result = collector.send([writing(1000, 300, 700), writing(1000, 300, 701)]).json()

    assert result["accepted"] == 1
    [rejected] = result["rejected"]
    assert rejected["index"] == 1
    assert rejected["errors"]["tokens.prompt_cache_write"] == [
        "tokens.prompt_cached + tokens.prompt_cache_write must be <= tokens.prompt (prompt includes cache reads "
        "and writes)"
    ]
    assert "tokens.prompt_cache_write" in Rejection.objects.get().errors


def test_a_failed_or_repeated_request_wastes_its_cache_writes_with_its_prompt(collector):
    hashed = "ab" * 16
    collector.send(
        [
            writing(1000, 0, 400, **{"outcome.status": "error", "outcome.finish_reason": None}),
            writing(1000, 0, 400, prompt_hash=hashed),
            writing(1000, 0, 400, prompt_hash=hashed, ts=(T0 + timedelta(seconds=10)).isoformat()),
            writing(1000, 0, 400, **{"outcome.finish_reason": "length"}),
        ]
    )

    assert by_reason() == {
        "waste.error": 1100,
        "waste.duplicate": 1100,
        "effective.input": 1200,
        "effective.cache_write": 800,
        "effective.output": 100,
        "waste.truncated": 100,
    }


@pytest.mark.django_db(transaction=False)
def test_cache_writes_are_priced_as_input_unless_the_book_sets_a_cache_write_price(collector):
    claude = "claude-sonnet"
    factories.price_version(effective_from=T0 - timedelta(days=1), prices={claude: ("3", "0.3", "15")})
    collector.send([writing(3 * M, M, M, model=claude)])
    hours_price(start=T0, end=T0 + timedelta(hours=1))
    as_input = dict(HourlyCost.objects.values_list("component", "cost"))
    assert as_input[CACHE_WRITE] == Decimal(3)  # a million written tokens at the input price
    assert as_input[UNCACHED] == Decimal(3)

    price_set(model_pattern=claude, prices={"cache_write": Decimal("3.75")}, effective_from=T0)
    hours_price(start=T0, end=T0 + timedelta(hours=1))

    repriced = dict(HourlyCost.objects.values_list("component", "cost"))
    assert repriced[CACHE_WRITE] == Decimal("3.75")  # 1.25 x input, as the book says
    assert repriced[UNCACHED] == Decimal(3)  # the plain input keeps the input price
    assert sum(repriced.values()) == Decimal("3") + Decimal("0.3") + Decimal("3.75") + Decimal("0.0015")
