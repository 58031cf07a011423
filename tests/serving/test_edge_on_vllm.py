"""The red-team findings of 2026-12-05 on the real vLLM server (issue 31, docs/security.md): a
caller whose own budget is spent (ads-app, key sk-ads) tries to be served anyway through a
route the middleware did not know, a second Authorization header, a body over the middleware's
limit; a caller that floods free dims tries to push `caller` out of its records. Every route
of the running server's own table that is not metered is refused before the engine."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.processes import PlatformServer, VllmServer
from tests.serving.conftest import ADS_KEY, BUDGET_POLL, SEARCH_KEY
from tests.serving.test_budgets_on_vllm import budget_put, held_server, settle  # noqa: F401 (a fixture)
from wire import edge

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "who pays for this one?"}]
CHAT = {"model": "tiny-llama", "max_tokens": 4, "ignore_eos": True, "messages": QUESTION}
# The same request in the forms of the routes the middleware did not know (issue 31, finding 1).
UNKNOWN_ROUTES = {
    "/v1/messages": {"model": "tiny-llama", "max_tokens": 4, "messages": QUESTION},
    "/invocations": CHAT,
    "/v1/chat/completions/batch": {"model": "tiny-llama", "max_tokens": 4, "messages": [QUESTION, QUESTION]},
}


@pytest.fixture
def spent(held_server: VllmServer, platform: PlatformServer) -> Iterator[VllmServer]:  # noqa: F811
    """The session's server with ads-app's own budget spent (lifted again by held_server)."""
    run = uuid.uuid4().hex
    time.sleep(3 * BUDGET_POLL)  # the server has read the lift of a budget an earlier test spent
    first = post(held_server, "/v1/chat/completions", CHAT, ADS_KEY, **{"X-Costplatform-Run": run})
    assert first.status_code == 200, first.text
    budget_put(platform, "ads", 1, caller="ads-app")
    settle(platform, run, 1)
    assert post(held_server, "/v1/chat/completions", CHAT, ADS_KEY).status_code == 429
    yield held_server


def post(server: VllmServer, path: str, body: Any, key: str | None = None, **headers: str) -> httpx.Response:
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=120)


@pytest.mark.parametrize("path", sorted(UNKNOWN_ROUTES))
def test_a_route_the_middleware_does_not_meter_is_refused_before_the_engine(spent: VllmServer, path: str) -> None:
    response = post(spent, path, UNKNOWN_ROUTES[path], ADS_KEY)

    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "route_not_metered"


def test_every_route_of_the_servers_table_is_metered_allowed_or_refused(vllm_server: VllmServer) -> None:
    """The session server's own routes (its OpenAPI document lists the HTTP ones): each is one
    of the edge's metered or unmetered routes, or answered by the middleware's refusal."""
    table = httpx.get(f"{vllm_server.url}/openapi.json", timeout=30).json()["paths"]
    refused = []
    for path, operations in table.items():
        for method in operations:
            if edge.vllm_route(method.upper(), path).served:
                continue
            url = f"{vllm_server.url}{path.replace('{', '').replace('}', '')}"
            answer = httpx.request(method.upper(), url, json={}, timeout=30)
            assert answer.status_code == 404, (method, path, answer.text)
            assert answer.json()["error"]["code"] == "route_not_metered", (method, path)
            refused.append(path)
    assert "/invocations" in refused and "/v1/messages" in refused


def test_a_request_with_two_authorization_headers_is_refused(spent: VllmServer) -> None:
    headers = [("Authorization", f"Bearer {ADS_KEY}"), ("Authorization", "Bearer anything")]

    response = httpx.post(f"{spent.url}/v1/chat/completions", json=CHAT, headers=headers, timeout=120)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "two_authorizations"


def test_a_body_over_the_limit_is_refused_with_413_not_passed_through(spent: VllmServer) -> None:
    padded = CHAT | {"user": "x" * (edge.MAX_BODY + 1024)}

    response = httpx.post(
        f"{spent.url}/v1/chat/completions",
        content=json.dumps(padded).encode(),
        headers={"Authorization": f"Bearer {ADS_KEY}", "Content-Type": "application/json"},
        timeout=120,
    )

    assert response.status_code == 413, response.text[:500]
    assert response.json()["error"]["code"] == "body_too_large"


def test_thirty_free_dims_never_push_the_caller_out_of_its_record(
    vllm_server: VllmServer, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex
    flood = {f"X-Costplatform-F{i:02d}": run for i in range(30)}

    response = post(vllm_server, "/v1/chat/completions", CHAT, SEARCH_KEY, **flood)

    assert response.status_code == 200, response.text
    (record,) = platform.wait_records(1, **{"dims.f00": run})
    dims = record["dims"]
    assert (dims["caller"], dims["business_line"], dims["team"], dims["env"]) == (
        "search-app", "search", "search-web", "test"
    )  # fmt: skip
    assert len(dims) == 32


def test_with_vllms_api_key_the_caller_billed_is_the_one_vllm_authenticated(
    gated_server: VllmServer, platform: PlatformServer
) -> None:
    """Finding 2 as the red team ran it: vLLM's key check reads the first Authorization, and the
    record must name that caller; a second Authorization is refused before either reads one."""
    run = uuid.uuid4().hex
    time.sleep(3 * BUDGET_POLL)  # the server has read the lift of ads-app's budget the tests above spent
    two = [("Authorization", f"Bearer {ADS_KEY}"), ("Authorization", "Bearer anything"), ("X-Costplatform-Run", run)]

    doubled = httpx.post(f"{gated_server.url}/v1/chat/completions", json=CHAT, headers=two, timeout=120)
    served = post(gated_server, "/v1/chat/completions", CHAT, ADS_KEY, **{"X-Costplatform-Run": run})
    unknown = post(gated_server, "/v1/chat/completions", CHAT, "anything", **{"X-Costplatform-Run": run})

    assert (doubled.status_code, served.status_code, unknown.status_code) == (400, 200, 401)
    assert doubled.json()["error"]["code"] == "two_authorizations"
    records = {r["outcome"]["status"]: r for r in platform.wait_records(2, **{"dims.run": run})}
    assert sorted(records) == ["error", "ok"]  # the 401 is recorded, with no tokens and no caller
    assert records["ok"]["dims"]["caller"] == "ads-app" and records["ok"]["dims"]["business_line"] == "ads"
    assert "caller" not in records["error"]["dims"]
