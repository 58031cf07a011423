"""The GenAI token-usage metrics (serving/genai_metrics.py): records built by the emitter are
pushed by the OpenTelemetry SDK's OTLP/HTTP exporter to a receiver on loopback, which decodes
each ExportMetricsServiceRequest with opentelemetry-proto. No vLLM: the emitter is fed the
engine's counts as the stat logger hands them over, and records of every kind are observed as
wire.record builds them (checked against the contract's RecordV1)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, Metric

from serving import genai_metrics as gm
from serving.__main__ import main, parser, vllm_command
from serving.config import ServingConfig
from serving.runtime import Emitter, EngineCounts
from wire import record as rec
from wire.contract import STATUSES, RecordV1


class Receiver:
    """An OTLP/HTTP metrics endpoint on loopback: every request body decoded and kept."""

    def __init__(self, stall: float = 0.0) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.content_types: list[str] = []
        self.authorizations: list[str | None] = []
        self.stall = stall
        self.busy = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.busy.set()
                time.sleep(receiver.stall)
                message = ExportMetricsServiceRequest()
                message.ParseFromString(body)
                receiver.content_types.append(self.headers["Content-Type"])
                receiver.authorizations.append(self.headers.get("Authorization"))
                receiver.requests.append(message)
                answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/metrics" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def latest(self) -> dict[str, Metric]:
        """The metrics of the last export (cumulative: each holds every record so far)."""
        out: dict[str, Metric] = {}
        for resource in self.requests[-1].resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out[metric.name] = metric
        return out


def attrs(pairs: Any) -> dict[str, Any]:
    def value(kv: KeyValue) -> Any:
        return getattr(kv.value, kv.value.WhichOneof("value"))

    return {kv.key: value(kv) for kv in pairs}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


class Spool:
    """Stands in for the shipper's pipeline: the records the emitter submits."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def submit(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def config(tmp_path: Path) -> ServingConfig:
    return ServingConfig(platform_url="http://127.0.0.1:9", collector_key="k", spool_dir=tmp_path, segments=False)


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def records() -> list[dict[str, Any]]:
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    made = [
        rec.make_record(
            record_id="a",
            ts=ts,
            model="tiny",
            endpoint="chat.completions",
            tokens={"prompt": 400, "prompt_cached": 256, "completion": 30, "reasoning": 12},
            status="ok",
            finish_reason="stop",
        ),
        rec.make_record(
            record_id="b",
            ts=ts,
            model="tiny",
            endpoint="chat.completions",
            tokens={"prompt": 90, "completion": 7},
            status="ok",
            finish_reason="length",
        ),
        rec.make_record(
            record_id="c",
            ts=ts,
            model="tiny",
            endpoint="chat.completions",
            tokens={"prompt": 50, "completion": 3},
            status="aborted",
            finish_reason="abort",
        ),
        rec.make_record(
            record_id="d",
            ts=ts,
            model="tiny",
            endpoint="completions",
            tokens={"prompt": 20, "prompt_cached": 0, "completion": 5},
            status="ok",
            finish_reason="stop",
        ),
    ]
    for record in made:
        msgspec.convert(record, RecordV1, strict=False)  # every one a valid record v1
    return made


def sums(metric: Metric) -> dict[tuple[tuple[str, Any], ...], int]:
    points = metric.sum.data_points if metric.HasField("sum") else metric.histogram.data_points
    return {
        tuple(sorted(attrs(p.attributes).items())): int(p.as_int if metric.HasField("sum") else p.sum) for p in points
    }


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


def test_the_emitter_shows_each_record_it_builds_to_the_metrics(receiver: Receiver, tmp_path: Path) -> None:
    metrics = gm.TokenMetrics(receiver.url)
    spool = Spool()
    emitter = Emitter(config(tmp_path), spool, served_model="tiny", observers=[metrics.observe])
    try:
        for i, (prompt, cached, completion) in enumerate([(374, 256, 16), (120, 0, 40), (9, 0, 1)]):
            emitter.submit(None, [EngineCounts(f"cmpl-{i}", "tiny", prompt, cached, completion, "stop", e2e_s=0.1)])
        wait_for(lambda: len(spool.records) == 3)
        emitter.close()
        assert metrics.flush()
    finally:
        metrics.shutdown()

    got = receiver.latest()
    tokens = [r["tokens"] for r in spool.records]
    input_total = sum(sums(got["gen_ai.client.inference.usage.input_tokens"]).values())
    output_total = sum(sums(got["gen_ai.client.inference.usage.output_tokens"]).values())
    cached_total = sum(sums(got["gen_ai.client.inference.usage.cache_read.input_tokens"]).values())
    assert input_total == sum(t["prompt"] for t in tokens) == 503
    assert output_total == sum(t["completion"] for t in tokens) == 57
    assert cached_total == sum(t.get("prompt_cached", 0) for t in tokens) == 256
    # The engine's counts of a request no middleware watched: no endpoint, a text completion.
    points = got["gen_ai.client.inference.usage.input_tokens"].sum.data_points
    assert {attrs(p.attributes)["gen_ai.operation.name"] for p in points} == {"text_completion"}


def test_a_stalled_collector_holds_up_neither_records_nor_requests(tmp_path: Path) -> None:
    receiver = Receiver(stall=3.0)
    metrics = gm.TokenMetrics(receiver.url, export_interval_ms=50)
    spool = Spool()
    emitter = Emitter(config(tmp_path), spool, observers=[metrics.observe])
    try:
        metrics.observe(records()[0])
        assert receiver.busy.wait(5)  # an export is in flight, the collector not answering
        began = time.perf_counter()
        for i in range(200):
            emitter.submit(None, [EngineCounts(f"cmpl-{i}", "tiny", 100, 0, 10, "stop")])
        submitted = time.perf_counter() - began
        wait_for(lambda: len(spool.records) == 200, timeout=2.5)
        built = time.perf_counter() - began
        emitter.close()
    finally:
        metrics.shutdown()
        receiver.close()

    assert submitted < 0.2
    assert built < 2.5 < receiver.stall  # all 200 built while the first export was still waiting


def test_an_observer_that_fails_costs_no_record(tmp_path: Path) -> None:
    def broken(record: dict[str, Any], served_model: str | None) -> None:
        raise RuntimeError("collector library broke")

    seen: list[str] = []
    spool = Spool()
    emitter = Emitter(config(tmp_path), spool, observers=[broken, lambda r, _: seen.append(r["record_id"])])
    emitter.submit(None, [EngineCounts("cmpl-1", "tiny", 10, 0, 2, "stop")])
    wait_for(lambda: seen)
    emitter.close()

    assert [r["record_id"] for r in spool.records] == seen == ["cmpl-1"]


def test_it_is_off_unless_an_endpoint_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(gm.ENV_ENDPOINT, raising=False)
    assert gm.TokenMetrics.from_env() is None

    args, rest = parser().parse_known_args(
        [
            "--model",
            "m",
            "--costplatform-url",
            "http://p",
            "--collector-key",
            "k",
            "--otlp-metrics-endpoint",
            "http://c",
        ]
    )
    _, env = vllm_command(args, rest)
    assert env[gm.ENV_ENDPOINT] == "http://c"
    args, rest = parser().parse_known_args(["--model", "m", "--costplatform-url", "http://p", "--collector-key", "k"])
    assert gm.ENV_ENDPOINT not in vllm_command(args, rest)[1]


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


def test_without_the_sdk_the_launcher_refuses_and_the_server_serves_records(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(gm.PACKAGES, "opentelemetry.sdk.no_such_module", "opentelemetry-sdk-metrics-x")
    monkeypatch.setenv(gm.ENV_ENDPOINT, "http://127.0.0.1:9/v1/metrics")
    assert gm.missing_packages() == ["opentelemetry-sdk-metrics-x"]
    assert gm.TokenMetrics.from_env() is None  # logged; the records go on

    def exec_vllm(*args: Any) -> None:
        raise AssertionError("the launcher started vLLM")

    monkeypatch.setattr(os, "execvpe", exec_vllm)
    with pytest.raises(SystemExit):
        main(["--model", "m", "--costplatform-url", "http://p", "--collector-key", "k", "--otlp-metrics-endpoint", "x"])
    assert "pip install opentelemetry-sdk-metrics-x" in capsys.readouterr().err


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
