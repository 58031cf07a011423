"""The proxy's GenAI token-usage metrics (wire/genai_metrics.py): each record it builds in front
of a real loopback upstream (tests/collectors/openai_upstream.py) is handed on through
wire.edge.hand_on, as the vLLM server's are, and pushed by the OpenTelemetry SDK's OTLP/HTTP
exporter to a receiver on loopback (tests/wire/otlp_receiver.py): the same names and attributes,
its provider the upstream's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.httpserve import ServerThread
from collectors.proxy import main
from tests.collectors.openai_upstream import Upstream
from tests.collectors.test_proxy import CLIENT_MAP, Records, chat, rig_for
from tests.wire.otlp_receiver import Receiver, attrs, receiver_fixture, sums
from wire import genai_metrics as gm

__all__ = ["receiver_fixture"]

COUNTERS = {
    gm.USAGE_INPUT: "prompt",
    gm.USAGE_OUTPUT: "completion",
    gm.USAGE_CACHE_READ: "prompt_cached",
    gm.USAGE_CACHE_WRITE: "prompt_cache_write",
    gm.USAGE_REASONING: "reasoning",
}


@pytest.fixture(name="loopback_upstream", scope="module")
def loopback_upstream_fixture() -> Iterator[tuple[Upstream, str]]:
    fake = Upstream()
    with ServerThread(fake.app()) as server:
        yield fake, server.url


@pytest.fixture(name="attribution_map")
def attribution_map_fixture(tmp_path: Path) -> Path:
    path = tmp_path / "attribution.toml"
    path.write_text(CLIENT_MAP)
    return path


def key(attributes: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(attributes.items()))


def test_the_proxy_pushes_the_token_usage_of_each_record_under_the_conventions_names(
    loopback_upstream: tuple[Upstream, str], attribution_map: Path, receiver: Receiver
) -> None:
    metrics = gm.TokenMetrics(receiver.url, provider="openai", service=gm.PROXY_SERVICE)
    records = Records()
    try:
        for rig in rig_for(loopback_upstream, attribution_map, records, token_metrics=metrics):
            rig.post("/v1/chat/completions", chat(reasoning_tokens=5))
            rig.post("/v1/chat/completions", chat(stream=True, cache_write_tokens=8))
            rig.post("/v1/chat/completions", chat("fail-429", stream=True))
            rig.post("/v1/embeddings", {"model": "bge-m3", "input": ["refund policy"]})
            rig.post("/v1/completions", {"model": "m", "prompt": "Hi", "usage_shape": "anthropic"})
            built = records.wait(5)
        assert metrics.flush()
    finally:
        metrics.shutdown()

    got = receiver.latest()
    assert set(got) == {*COUNTERS, gm.OPERATION_INPUT, gm.OPERATION_OUTPUT, gm.TOKEN_USAGE}
    # Each counter holds, per operation, exactly the tokens of the records.
    for name, field in COUNTERS.items():
        want: dict[Any, int] = {}
        for record in built:
            attributes = gm.attributes(record, record["model"], "openai") | {"gen_ai.token.modality": "unknown"}
            want[key(attributes)] = want.get(key(attributes), 0) + record["tokens"].get(field, 0)
        assert sums(got[name]) == want, name
    assert sum(sums(got[gm.USAGE_REASONING]).values()) == 5
    assert sum(sums(got[gm.USAGE_CACHE_WRITE]).values()) == 8
    # The operations: the upstream's 429 is a rejected request, in error.type.
    operations = {key(attrs(p.attributes)): p.count for p in got[gm.OPERATION_INPUT].histogram.data_points}
    rejected = gm.attributes(next(r for r in built if r["outcome"]["status"] == "rejected"), None, "openai")
    assert operations[key(rejected | {"error.type": "rejected"})] == 1
    assert sum(operations.values()) == len(built) == 5
    assert {dict(k)["gen_ai.operation.name"] for k in operations} == {"chat", "embeddings", "text_completion"}
    assert {dict(k)["gen_ai.provider.name"] for k in operations} == {"openai"}
    resource = attrs(receiver.requests[-1].resource_metrics[0].resource.attributes)
    assert resource["service.name"] == "costplatform-proxy"


def test_without_metrics_the_proxy_records_as_before(
    loopback_upstream: tuple[Upstream, str], attribution_map: Path
) -> None:
    records = Records()
    for rig in rig_for(loopback_upstream, attribution_map, records):
        rig.post("/v1/chat/completions", chat())
        assert records.wait(1)[0]["outcome"]["status"] == "ok"


def test_the_proxy_refuses_to_start_pushing_without_the_sdk(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(gm.PACKAGES, "opentelemetry.sdk.no_such_module", "opentelemetry-sdk-metrics-x")
    argv = ["--upstream", "https://api.openai.com", "--spool", str(tmp_path), "--platform-url", "http://p"]
    with pytest.raises(SystemExit):
        main([*argv, "--key", "k", "--otlp-metrics-endpoint", "http://127.0.0.1:9/v1/metrics"])
    assert "pip install opentelemetry-sdk-metrics-x" in capsys.readouterr().err
