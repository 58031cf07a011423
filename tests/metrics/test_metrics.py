"""GET /metrics: series and values for records stored, priced and alerted on through the real
services; the top-N label rule; access by token or address; the read cache."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from apps.accounts.models import CollectorKey
from apps.alerts.services import channel_send_test
from apps.metrics.collector import platform_collector
from apps.pipeline.records import batch_ingest
from apps.pricing.services import hours_price
from tests import factories
from tests.conftest import Collector

NOW = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)
MODEL = "qwen2.5-7b-instruct"


@pytest.fixture(autouse=True)
def _fresh(settings: Any) -> Iterator[None]:
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOW = ["127.0.0.1/32"]
    platform_collector.clear()
    with time_machine.travel(NOW, tick=False):
        yield
    platform_collector.clear()


def scrape(client: Client, **extra: Any) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The exposition as {sample name: {sorted labels: value}}."""
    response = client.get("/metrics", REMOTE_ADDR=extra.pop("addr", "127.0.0.1"), **extra)
    assert response.status_code == 200, response.content
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def series(found: dict, name: str, **labels: str) -> float:
    return found[name][tuple(sorted(labels.items()))]


def ingest(records: list[dict[str, Any]], source: str = "metrics-test") -> tuple[Any, CollectorKey]:
    key = CollectorKey.objects.filter(name=source).first() or factories.collector_key(source).key
    body = json.dumps({"records": records}).encode()
    return batch_ingest(key=key, body=body, ndjson=False), key


def at(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).isoformat()


def rec(line: str, *, ts: str, model: str = MODEL, **overrides: Any) -> dict[str, Any]:
    """A record of 1,000 prompt tokens (400 cached) and 200 generated, with no prompt hash (so
    no duplicates) and no system/tool split."""
    fields: dict[str, Any] = {
        "ts": ts,
        "model": model,
        "dims": {"business_line": line, "feature": "faq"},
        "tokens": {"prompt": 1000, "prompt_cached": 400, "completion": 200},
        "prompt_hash": factories.DELETE,
    }
    return factories.record(**(fields | overrides))


def test_it_reports_tokens_cost_records_lag_and_health_from_the_services(db: None, client: Client) -> None:
    records = [
        rec("cs", ts=at(10)),  # this hour
        rec("cs", ts=at(120)),  # earlier today: day window only
        rec("cs", ts=at(5), outcome={"status": "error", "finish_reason": "error"}),
    ]
    bad = rec("cs", ts=at(1), tokens={"prompt": -1, "completion": 0})
    new = factories.collector_key("metrics-test")
    response = Collector(client, new.secret).send([*records, bad])  # the API: it also marks the key seen
    assert (response.json()["accepted"], len(response.json()["rejected"])) == (3, 1), response.json()
    key = new.key
    factories.price_version(effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={MODEL: ("2", "0.5", "6")})
    hours_price(start=datetime(2026, 11, 19, tzinfo=UTC), end=datetime(2026, 11, 21, tzinfo=UTC))
    channel_send_test(channel=factories.channel())

    found = scrape(client)
    labels = {"model": MODEL, "business_line": "cs"}

    def tokens(window: str, reason: str) -> float:
        return series(
            found, f"costplatform_tokens_{window}", **labels, reason=reason, **{"class": reason.split(".")[0]}
        )

    def cost(window: str, token_class: str) -> Decimal:
        value = series(found, f"costplatform_cost_{window}", **labels, currency="CNY", **{"class": token_class})
        return Decimal(str(value))

    # Cached prompt tokens are cache whatever the status; the error's other 800 tokens are waste.
    assert (tokens("1h", "cache.prefix_cache"), tokens("24h", "cache.prefix_cache")) == (800, 1200)
    assert (tokens("24h", "effective.input"), tokens("24h", "effective.output")) == (1200, 400)
    assert tokens("1h", "waste.error") == 800
    # Effective: 600 input + 200 output a request at 2 and 6 per million; cache: 400 at 0.5.
    assert cost("24h", "effective") == Decimal(2 * (600 * 2 + 200 * 6)) / 1_000_000
    assert cost("1h", "cache") == Decimal(2 * 400) * Decimal("0.5") / 1_000_000
    assert series(found, "costplatform_records_24h", **labels, status="ok") == 2
    assert series(found, "costplatform_records_1h", **labels, status="error") == 1
    assert series(found, "costplatform_rejections_1h", source=key.name) == 1
    assert series(found, "costplatform_ingest_lag_seconds", source=key.name) == 5 * 60
    assert series(found, "costplatform_collector_last_seen_timestamp_seconds", source=key.name) > 0
    computed = 3 * 1200 - 1200  # the health ratios are shares of the tokens computed: all but the cache class
    assert series(found, "costplatform_health_ratio_24h", ratio="waste") == pytest.approx(800 / computed)
    assert series(found, "costplatform_health_ratio_24h", ratio="effective") == pytest.approx(1600 / computed)
    assert series(found, "costplatform_health_ratio_24h", ratio="cache_hit") == pytest.approx(0.4)
    assert series(found, "costplatform_alert_notifications_1h", channel_kind="webhook", status="queued") == 1
    assert series(found, "costplatform_alert_notifications_overdue") == 1


def test_the_ingest_counter_counts_what_the_service_stored(db: None, client: Client) -> None:
    before = scrape(client)["costplatform_ingest_records_total"]
    ingest([rec("cs", ts=at(3)), rec("cs", ts=at(4))])
    again = [rec("cs", ts=at(3), record_id="same-id")]
    ingest(again, source="other-source")
    ingest(again, source="other-source")
    after = scrape(client)["costplatform_ingest_records_total"]
    delta = {dict(k)["result"]: after[k] - before.get(k, 0) for k in after}
    assert delta == {"accepted": 3, "duplicate": 1, "rejected": 0}


def test_business_lines_and_models_beyond_the_top_n_are_other(db: None, client: Client, settings: Any) -> None:
    settings.METRICS_TOP_BUSINESS_LINES = 2
    settings.METRICS_TOP_MODELS = 1
    records = []
    for i, line in enumerate(["a", "b", "c", "d", "e"]):
        for _ in range(5 - i):  # a has most tokens, e fewest
            records.append(rec(line, ts=at(2), model=f"model-{i % 2}"))
    records.append(rec("x", ts=at(2), dims={"feature": "no-line"}))
    ingest(records)
    found = scrape(client)
    for name in ("costplatform_tokens_24h", "costplatform_records_1h"):
        lines = {dict(k)["business_line"] for k in found[name]}
        models = {dict(k)["model"] for k in found[name]}
        assert lines == {"a", "b", "other"}, name
        assert models == {"model-0", "other"}, name
    # Nothing is lost by folding: every record is counted under some label.
    assert sum(found["costplatform_records_24h"].values()) == len(records)
    reasons = {dict(k)["reason"] for k in found["costplatform_tokens_24h"]}
    assert len(found["costplatform_tokens_24h"]) <= len(reasons) * (1 + 1) * (2 + 1)


def test_a_line_without_business_line_is_none(db: None, client: Client) -> None:
    ingest([rec("x", ts=at(2), dims={"feature": "no-line"})])
    lines = {dict(k)["business_line"] for k in scrape(client)["costplatform_records_1h"]}
    assert lines == {"(none)"}


def test_access_needs_the_token_or_an_allowed_address(db: None, client: Client, settings: Any) -> None:
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    settings.METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    settings.METRICS_ALLOW = ["10.1.0.0/16"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_scrapes_within_the_cache_time_read_the_database_once(
    db: None, client: Client, django_assert_max_num_queries: Any
) -> None:
    ingest([rec("cs", ts=at(2))])
    first = scrape(client)
    ingest([rec("cs", ts=at(2))])
    with django_assert_max_num_queries(0):
        second = scrape(client)
    assert second["costplatform_records_1h"] == first["costplatform_records_1h"]
    platform_collector.clear()
    assert sum(scrape(client)["costplatform_records_1h"].values()) == 2
