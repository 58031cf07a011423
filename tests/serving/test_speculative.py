"""Speculative decoding: the drafts proposed and accepted for each request, as vLLM counted them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import PlatformServer, VllmServer
from tests.serving.test_vllm_instrumentation import one_record

pytestmark = pytest.mark.slow
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}


@pytest.fixture(scope="module")
def spec_server(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, platform: PlatformServer, attribution_map: Path
) -> Iterator[VllmServer]:
    extra = ["--speculative-config", json.dumps(NGRAM), "--max-model-len", "1024"]
    extra += ["--attribution-map", str(attribution_map)]
    server = VllmServer(tmp_path_factory.mktemp("vllm-spec"), tiny_model, platform, extra=extra)
    yield server.start()
    server.stop()


def spec_counters(server: VllmServer) -> tuple[float, float]:
    values = dict.fromkeys(("draft_tokens", "accepted_tokens"), 0.0)
    for line in server.metrics().splitlines():
        for name in values:
            if line.startswith(f"vllm:spec_decode_num_{name}_total{{"):
                values[name] += float(line.rsplit(" ", 1)[1])
    return values["draft_tokens"], values["accepted_tokens"]


def test_it_records_the_speculative_drafts_of_each_request(spec_server: VllmServer, platform: PlatformServer) -> None:
    # n-gram speculative decoding: a repetitive prompt gets drafts proposed.
    run = uuid.uuid4().hex
    drafts_before, accepted_before = spec_counters(spec_server)
    response = httpx.post(
        f"{spec_server.url}/v1/completions",
        json={"model": "tiny-llama", "prompt": "a b c a b c a b c a b c a b c", "max_tokens": 40, "ignore_eos": True},
        headers={"X-Costplatform-Run": run},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    drafts_after, accepted_after = spec_counters(spec_server)

    record = one_record(platform, run)
    assert record["tokens"]["draft"] == drafts_after - drafts_before > 0
    assert record["tokens"]["draft_accepted"] == accepted_after - accepted_before
