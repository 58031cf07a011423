"""Prompt-cache writes on the pages: the record page's count and component beside the cache
reads, the effective class's reason with what it means, in both languages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.ingest.models import Record
from tests.conftest import T0, priced
from tests.factories import record

pytestmark = pytest.mark.django_db


@pytest.fixture
def writing(collector) -> None:
    at = {"ts": (T0 + timedelta(minutes=5)).isoformat(), "prompt_hash": None}
    tokens = {"prompt": 1000, "prompt_cached": 300, "prompt_cache_write": 640, "completion": 20}
    assert collector.send([record(**at, tokens=tokens)]).json()["accepted"] == 1
    priced()


def test_the_record_page_shows_cache_writes_apart_from_cache_reads(writing, as_user) -> None:
    client = as_user("engineer")
    kept = Record.objects.get()

    page = client.get("/waste/record/", {"ts": kept.ts.isoformat(), "source": kept.source_id, "key": kept.record_key})
    text = page.content.decode()

    assert page.status_code == 200
    assert "prompt tokens written to the cache" in text and ">640<" in text
    assert 'data-component="cache_write"' in text and "effective.cache_write" in text
    assert 'data-component="cached_prompt"' in text and "cache.prefix_cache" in text
    assert ">60<" in text  # the uncached prompt: 1000 - 300 read - 640 written


def test_the_effective_class_names_cache_writes_and_what_they_mean(writing, as_user) -> None:
    client = as_user("engineer")

    english = client.get("/waste/?class=effective").content.decode()
    client.cookies["django_language"] = "zh-hans"
    chinese = client.get("/waste/?class=effective").content.decode()

    assert "effective.cache_write" in english and "wrote into its prompt cache" in english
    assert "写入其提示词缓存" in chinese and "只在前缀会被再次读取时才写入缓存" in chinese


def test_the_overview_says_how_many_prompt_tokens_were_written_to_a_cache(writing, as_user) -> None:
    client = as_user("engineer")
    english = client.get("/overview/").content.decode()  # the default window holds T0
    client.cookies["django_language"] = "zh-hans"
    chinese = client.get("/overview/").content.decode()

    assert 'id="cache-writes"' in english and "written to a provider's prompt cache: 640," in english
    assert "写入提供方提示词缓存的提示词元\uff1a640" in chinese  # a full-width colon


def test_the_overview_says_nothing_of_cache_writes_where_there_are_none(collector, as_user) -> None:
    at = {"ts": (T0 + timedelta(minutes=5)).isoformat(), "prompt_hash": None}
    assert collector.send([record(**at)]).json()["accepted"] == 1
    priced()

    page = as_user("engineer").get("/overview/").content.decode()
    assert 'id="classes"' in page and 'id="cache-writes"' not in page
