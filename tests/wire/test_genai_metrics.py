"""The GenAI token-usage metrics every edge pushes (wire/genai_metrics.py) and the one place an
edge hands its records to them (wire.edge.hand_on): records as wire.record builds them are pushed
by the OpenTelemetry SDK's OTLP/HTTP exporter to a receiver on loopback
(tests/wire/otlp_receiver.py). No vLLM, no proxy: tests/serving/ and tests/collectors/ hold the
edges' own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from tests.wire.otlp_receiver import Receiver, attrs, receiver_fixture, records, sums
from wire import edge
from wire import genai_metrics as gm
from wire import record as rec
from wire.contract import STATUSES

__all__ = ["receiver_fixture"]


def test_it_pushes_the_token_usage_of_records_under_the_conventions_names(receiver: Receiver) -> None:
    metrics = gm.TokenMetrics(receiver.url)
    try:
        for record in records():
            metrics.observe(record, "tiny-served")
        assert metrics.flush()
    finally:
        metrics.shutdown()

    assert receiver.content_types[0] == "application/x-protobuf"
    got = receiver.latest()
    assert set(got) == {
        "gen_ai.client.inference.usage.input_tokens",
        "gen_ai.client.inference.usage.output_tokens",
        "gen_ai.client.inference.usage.cache_read.input_tokens",
        "gen_ai.client.inference.usage.cache_write.input_tokens",
        "gen_ai.client.inference.usage.reasoning.output_tokens",
        "gen_ai.client.inference.operation.input_tokens",
        "gen_ai.client.inference.operation.output_tokens",
        "gen_ai.client.token.usage",
    }
    assert {m.unit for m in got.values()} == {"{token}"}
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": "tiny",
        "gen_ai.response.model": "tiny-served",
    }
    text = chat | {"gen_ai.operation.name": "text_completion"}

    def key(attributes: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted(attributes.items()))

    # The counters: monotonic cumulative sums per modality; input includes the cache reads,
    # output the reasoning, as the records' prompt and completion do.
    for name, (chat_total, text_total) in {
        "gen_ai.client.inference.usage.input_tokens": (400 + 90 + 50, 20),
        "gen_ai.client.inference.usage.output_tokens": (30 + 7 + 3, 5),
        "gen_ai.client.inference.usage.cache_read.input_tokens": (256, 0),
        "gen_ai.client.inference.usage.cache_write.input_tokens": (0, 0),
        "gen_ai.client.inference.usage.reasoning.output_tokens": (12, 0),
    }.items():
        metric = got[name]
        assert metric.sum.is_monotonic
        assert metric.sum.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
        assert sums(metric) == {
            key(chat | {"gen_ai.token.modality": "unknown"}): chat_total,
            key(text | {"gen_ai.token.modality": "unknown"}): text_total,
        }, name

    # The per-operation histograms: the conventions' buckets, error.type on the aborted one.
    operation = got["gen_ai.client.inference.operation.input_tokens"]
    assert list(operation.histogram.data_points[0].explicit_bounds) == list(gm.TOKEN_BUCKETS)
    assert sums(operation) == {key(chat): 490, key(chat | {"error.type": "aborted"}): 50, key(text): 20}
    counts = {key(attrs(p.attributes)): p.count for p in operation.histogram.data_points}
    assert counts == {key(chat): 2, key(chat | {"error.type": "aborted"}): 1, key(text): 1}
    assert sums(got["gen_ai.client.inference.operation.output_tokens"]) == {
        key(chat): 37,
        key(chat | {"error.type": "aborted"}): 3,
        key(text): 5,
    }

    # The deprecated histogram, by gen_ai.token.type.
    assert sums(got["gen_ai.client.token.usage"]) == {
        key(chat | {"gen_ai.token.type": "input"}): 540,
        key(chat | {"gen_ai.token.type": "output"}): 40,
        key(text | {"gen_ai.token.type": "input"}): 20,
        key(text | {"gen_ai.token.type": "output"}): 5,
    }
    resource = attrs(receiver.requests[-1].resource_metrics[0].resource.attributes)
    assert resource["service.name"] == "costplatform-serving"


def test_it_leaves_out_the_deprecated_histogram_when_asked(receiver: Receiver) -> None:
    metrics = gm.TokenMetrics(receiver.url, deprecated=False)
    try:
        metrics.observe(records()[0])
        assert metrics.flush()
    finally:
        metrics.shutdown()

    got = receiver.latest()
    assert "gen_ai.client.token.usage" not in got
    assert sums(got["gen_ai.client.inference.usage.input_tokens"]) == {
        tuple(
            sorted(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "vllm",
                    "gen_ai.request.model": "tiny",
                    "gen_ai.response.model": "tiny",
                    "gen_ai.token.modality": "unknown",
                }.items()
            )
        ): 400
    }


def test_it_names_the_operation_by_endpoint_and_the_error_by_status() -> None:
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    for endpoint, operation in [
        ("chat.completions", "chat"),
        ("responses", "chat"),
        ("completions", "text_completion"),
        ("embeddings", "embeddings"),
        (None, "text_completion"),
    ]:
        record = rec.make_record(record_id="x", ts=ts, model="m", tokens={}, status="ok", endpoint=endpoint)
        assert gm.attributes(record, None)["gen_ai.operation.name"] == operation
    assert set(gm.ERROR_TYPES) | {"ok"} == set(STATUSES)


def test_the_service_is_named_by_the_environment_else_costplatform_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert gm.resource().attributes["service.name"] == "costplatform-serving"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=gpu-pool-a,deployment.environment.name=prod")
    named = gm.resource().attributes
    assert (named["service.name"], named["deployment.environment.name"]) == ("gpu-pool-a", "prod")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gpu-pool-b")
    assert gm.resource().attributes["service.name"] == "gpu-pool-b"


def test_the_sdk_settings_reach_the_collector(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "authorization=Bearer%20collector-token")
    monkeypatch.setenv(gm.ENV_ENDPOINT, receiver.url)
    monkeypatch.setenv(gm.ENV_DEPRECATED, "0")
    metrics = gm.TokenMetrics.from_env()
    assert metrics is not None
    try:
        metrics.observe(records()[1])
        assert metrics.flush()
    finally:
        metrics.shutdown()

    assert receiver.authorizations[0] == "Bearer collector-token"
    assert "gen_ai.client.token.usage" not in receiver.latest()


def test_it_names_the_provider_of_an_upstream_by_its_host() -> None:
    for upstream, provider in [
        ("https://api.openai.com/v1", "openai"),
        ("https://api.anthropic.com", "anthropic"),
        ("https://API.DeepSeek.com:443/v1", "deepseek"),
        ("https://my-resource.openai.azure.com/openai", "azure.ai.openai"),
        ("https://bedrock-runtime.us-east-1.amazonaws.com", "aws.bedrock"),
        ("http://127.0.0.1:8000", gm.OPENAI_COMPATIBLE),
        ("vllm.internal:8000", gm.OPENAI_COMPATIBLE),
        ("https://api.openai.com.example.net", gm.OPENAI_COMPATIBLE),
    ]:
        assert gm.provider_of(upstream) == provider, upstream


def test_an_edge_names_its_provider_and_service(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    metrics = gm.TokenMetrics(receiver.url, provider="anthropic", service=gm.PROXY_SERVICE, deprecated=False)
    try:
        metrics.observe(records()[0], "claude-x-20260101")
        assert metrics.flush()
    finally:
        metrics.shutdown()

    (point,) = receiver.latest()["gen_ai.client.inference.usage.input_tokens"].sum.data_points
    got = attrs(point.attributes)
    assert (got["gen_ai.provider.name"], got["gen_ai.response.model"]) == ("anthropic", "claude-x-20260101")
    resource = attrs(receiver.requests[-1].resource_metrics[0].resource.attributes)
    assert resource["service.name"] == "costplatform-proxy"


class Sink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def submit(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def test_hand_on_puts_the_record_in_the_pipeline_before_any_observer_sees_it() -> None:
    sink, seen = Sink(), []

    def broken(record: dict[str, Any], served_model: str | None) -> None:
        raise RuntimeError("collector library broke")

    def watch(record: dict[str, Any], served_model: str | None) -> None:
        seen.append((record["record_id"], served_model, len(sink.records)))

    record = records()[1]
    edge.hand_on(record, sink, [watch, broken, watch], "tiny-served")

    assert sink.records == [record]
    assert seen == [("b", "tiny-served", 1)] * 2  # a failed observer stops neither the record nor the rest


def test_every_edge_shows_its_records_to_its_metrics_and_its_budget_gate() -> None:
    settled: list[dict[str, Any]] = []

    class Gate:
        def settle_record(self, record: dict[str, Any]) -> None:
            settled.append(record)

    assert edge.observers() == []
    (settle,) = edge.observers(budgets=Gate())  # type: ignore[arg-type]
    settle(records()[0], None)
    assert [r["record_id"] for r in settled] == ["a"]
