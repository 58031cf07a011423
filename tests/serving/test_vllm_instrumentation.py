"""The instrumentation on the real vLLM engine (CPU, a tiny random-weight Llama): every
request becomes a record in a real costplatform, with the engine's own counts."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.processes import PlatformServer, VllmServer

pytestmark = pytest.mark.slow

SYSTEM = "You are the support bot of a shop. Answer about orders, refunds and delivery. " * 3


def chat(server: VllmServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"model": "tiny-llama", "max_tokens": 16, **body}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=120)


def one_record(platform: PlatformServer, run: str, **filters: str) -> dict[str, Any]:
    (record,) = platform.wait_records(1, **{"dims.run": run, **filters})
    return record


def test_it_records_a_chat_request_with_its_dims_and_the_engines_counts(
    vllm_server: VllmServer, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex
    response = chat(
        vllm_server,
        {
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "where is my order"}],
            "metadata": {"feature": "order-status"},
        },
        **{
            "X-Request-Id": f"client-{run}",
            "X-Costplatform-Business-Line": "customer-service",
            "X-Costplatform-Run": run,
            "X-Costplatform-Attempt": "2",
            "X-Costplatform-Retry-Of": "chatcmpl-earlier",
        },
    )
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]

    record = one_record(platform, run)

    assert record["record_id"] == f"chatcmpl-client-{run}" == response.json()["id"]
    assert record["model"] == "tiny-llama"
    assert record["model_version"] == "random-fp32"
    assert record["endpoint"] == "chat.completions"
    assert record["dims"] == {
        "business_line": "customer-service",
        "feature": "order-status",
        "run": run,
        "env": "test",
    }
    assert record["tokens"]["prompt"] == usage["prompt_tokens"]
    assert record["tokens"]["completion"] == usage["completion_tokens"] == 16
    assert 0 < record["tokens"]["system"] < record["tokens"]["prompt"]
    assert record["outcome"] == {"status": "ok", "finish_reason": "length"}
    assert record["attempt"] == 2 and record["retry_of"] == "chatcmpl-earlier"
    assert len(record["prompt_hash"]) == 32
    assert record["timing"]["e2e"] >= record["timing"]["prefill"] >= 0
