"""The vLLM server's GenAI token-usage metrics (wire/genai_metrics.py): records built by the
emitter are shown to the metrics through wire.edge.hand_on and pushed by the OpenTelemetry SDK's
OTLP/HTTP exporter to a receiver on loopback (tests/wire/otlp_receiver.py). No vLLM: the emitter is
fed the engine's counts as the stat logger hands them over. The launcher's flag and its refusal
without the SDK."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from serving.__main__ import main, parser, vllm_command
from serving.config import ServingConfig
from serving.runtime import Emitter, EngineCounts
from tests.wire.otlp_receiver import Receiver, attrs, receiver_fixture, records, sums
from wire import genai_metrics as gm

__all__ = ["receiver_fixture"]


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
