"""Reasoning tokens on the pages: the record page's counts and components, the waste pages'
reasons with what they mean, in both languages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.ingest.models import Record
from tests.classification.helpers import ruleset_activated
from tests.conftest import T0, priced
from tests.factories import record

pytestmark = pytest.mark.django_db

OVERSPEND = "tokens.reasoning > 4 * (tokens.completion - tokens.reasoning)"


@pytest.fixture
def thinking(collector) -> None:
    ruleset_activated(moves=[(OVERSPEND, "reasoning", "waste.reasoning_overspend")])
    at = {"ts": (T0 + timedelta(minutes=5)).isoformat(), "prompt_hash": None}
    records = [
        record(**at, tokens={"prompt": 300, "completion": 500, "reasoning": 450}),  # 450 > 4 x 50: overspent
        record(**at, tokens={"prompt": 300, "completion": 500, "reasoning": 200}),  # 200 <= 4 x 300
    ]
    assert collector.send(records).json()["accepted"] == 2
    priced()


def test_the_record_page_shows_reasoning_tokens_and_their_reason(thinking, as_user) -> None:
    client = as_user("engineer")
    kept = Record.objects.get(reasoning=200)

    page = client.get("/waste/record/", {"ts": kept.ts.isoformat(), "source": kept.source_id, "key": kept.record_key})
    text = page.content.decode()

    assert page.status_code == 200
    assert "reasoning tokens" in text
    assert "effective.reasoning" in text and ">200<" in text.replace(",", "")


def test_the_waste_page_names_the_overspend_and_says_how_to_reduce_it(thinking, as_user) -> None:
    client = as_user("engineer")

    english = client.get("/waste/?class=waste").content.decode()
    client.cookies["django_language"] = "zh-hans"
    chinese = client.get("/waste/?class=waste").content.decode()

    assert "waste.reasoning_overspend" in english
    assert "thought more than N times its answer" in english and "Cap the reasoning budget" in english
    assert "推理量超过其回答 N 倍" in chinese and "限制推理预算" in chinese
