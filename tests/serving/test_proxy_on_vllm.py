"""The OpenAI-compatible proxy in front of the real vLLM server: what it records matches
what the engine counted."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from collectors.proxy import Settings, proxy_thread
from tests.processes import PlatformServer, VllmServer
from wire.attribution import Policy
from wire.shipper import Pipeline

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy(
    vllm_server: VllmServer, platform: PlatformServer, tiny_model: Path, tmp_path: Path, attribution_map: Path
) -> Iterator[str]:
    from transformers import AutoTokenizer  # here: every worker collects this module, one runs it

    pipeline = Pipeline(tmp_path / "spool", url=platform.url, key=platform.key, registry=CollectorRegistry()).start()
    settings = Settings(
        upstream=vllm_server.url,
        tokenizer=AutoTokenizer.from_pretrained(tiny_model),
        hash_key=b"proxy-tests",
        defaults={"via": "proxy"},
        policy=Policy(attribution_map),
    )
    with proxy_thread(settings, pipeline) as url:
        yield url
    assert pipeline.flush(30)
    pipeline.close()


def proxied(platform: PlatformServer, run: str, record_id: str) -> dict:
    # The proxy takes its X-Costplatform-* headers off: the server's own record carries no run dim.
    (record,) = platform.wait_records(1, **{"dims.run": run})
    assert record["record_id"] == record_id
    return record


def test_it_records_a_chat_request_through_the_proxy_with_the_engines_usage(
    proxy: str, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex
    body = {
        "model": "tiny-llama",
        "max_tokens": 12,
        "ignore_eos": True,  # the random model may sample its end token: the 12 tokens are certain
        "messages": [{"role": "system", "content": "be brief " * 20}, {"role": "user", "content": "refund?"}],
    }
    response = httpx.post(
        f"{proxy}/v1/chat/completions",
        json=body,
        headers={"X-Costplatform-Run": run, "X-Costplatform-Business-Line": "support"},
        timeout=60,
    )
    assert response.status_code == 200, response.text

    record = proxied(platform, run, response.headers["X-Costplatform-Record-Id"])
    usage = response.json()["usage"]
    assert record["tokens"]["prompt"] == usage["prompt_tokens"]
    assert record["tokens"]["completion"] == usage["completion_tokens"] == 12
    assert 0 < record["tokens"]["system"] < record["tokens"]["prompt"]
    assert record["dims"] == {"run": run, "business_line": "support", "via": "proxy"}
    assert record["outcome"]["status"] == "ok"


def test_it_streams_through_the_proxy_and_records_the_usage_the_client_did_not_ask_for(
    proxy: str, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex
    body = {
        "model": "tiny-llama",
        "max_tokens": 10,
        "ignore_eos": True,
        "stream": True,
        "messages": [{"role": "user", "content": "a story"}],
    }
    events = []
    with httpx.stream(
        "POST", f"{proxy}/v1/chat/completions", json=body, headers={"X-Costplatform-Run": run}, timeout=60
    ) as response:
        record_id = response.headers["X-Costplatform-Record-Id"]
        for line in response.iter_lines():
            if line.startswith("data:") and line != "data: [DONE]":
                events.append(json.loads(line[5:]))

    assert events and not any(e.get("usage") for e in events)
    record = proxied(platform, run, record_id)
    assert record["tokens"]["completion"] == 10
    assert record["tokens"]["prompt"] > 0
