"""The collectors page: keys with their last use and rejections, for engineers and admins."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.services import collector_key_create
from apps.pipeline.records import batch_ingest
from tests.factories import record

pytestmark = pytest.mark.django_db


def test_collectors_show_last_seen_and_rejections(collector, as_user) -> None:
    collector.send([record(**{"tokens.prompt": -1})])

    page = as_user("engineer").get("/collectors/").content.decode()

    assert "source-" in page and ">1<" in page and "prompt" in page
    assert as_user("viewer").get("/collectors/").status_code == 403


def test_a_rejection_reads_as_words_in_the_readers_language(collector, as_user) -> None:
    collector.send([record(**{"tokens.prompt": -1}), record(**{"tokens.prompt_cached": 10_000})])
    engineer = as_user("engineer")

    english = engineer.get("/collectors/").content.decode()
    engineer.cookies["django_language"] = "zh-hans"
    chinese = engineer.get("/collectors/").content.decode()

    assert "<code>tokens.prompt</code>: must be a whole number of at least 0" in english
    assert "<code>tokens.prompt_cached</code>: must be &lt;= tokens.prompt (prompt includes cached tokens)" in english
    assert "<code>tokens.prompt</code>: 必须是不小于 0 的整数" in chinese
    assert "<code>tokens.prompt_cached</code>: 必须 &lt;= tokens.prompt" in chinese and "已缓存的词元" in chinese
    assert "{&#x27;" not in english and "[&#x27;" not in english  # no Python dict or list


def test_every_write_path_marks_its_key_seen() -> None:
    key = collector_key_create(name="backfill-job").key
    assert key.last_seen_at is None

    batch_ingest(key=key, body=json.dumps({"records": [record()]}).encode(), ndjson=False)  # in process, no API

    key.refresh_from_db()
    assert key.last_seen_at is not None and timezone.now() - key.last_seen_at < timedelta(minutes=1)
