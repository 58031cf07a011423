"""The edge's refusals (wire/edge.py) against vLLM's own route table, and the middleware's
answers at its ASGI seam; the trusted dims kept under the 32-dim cap (wire/attribution.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from serving.middleware import CostplatformMiddleware
from wire import edge
from wire.attribution import EMPTY, decide, parse
from wire.record import MAX_DIMS, clean_dims

# Every task vLLM 0.32 knows, so that build_app registers every router it has.
ALL_TASKS = (
    "generate", "transcription", "realtime", "render",
    "embed", "classify", "token_embed", "token_classify", "plugin",
)  # fmt: skip


# Run in a child process: importing vLLM's server sets up vLLM's logging, which disables the
# loggers made before it (the spool's among them) for every later test of this worker.
ROUTES_SCRIPT = """
import json, sys
from types import SimpleNamespace
from starlette.routing import Mount, WebSocketRoute
from vllm.entrypoints.launchers.app import build_app
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "tiny-llama"])
args.enable_fault_tolerance = True
# The pooling and scoring routers are registered only for a model that pools.
pooling = SimpleNamespace(get_pooling_task=lambda tasks: "embed", hf_config=SimpleNamespace(num_labels=1),
                          io_processor_plugin=None)
app = build_app(args, supported_tasks=tuple(sys.argv[1:]), model_config=pooling)

def walk(routes, prefix=""):
    for route in routes:
        if isinstance(route, Mount):
            yield from walk(route.routes, prefix + route.path)
        elif isinstance(route, WebSocketRoute) or type(route).__name__ == "APIWebSocketRoute":
            yield "WEBSOCKET", prefix + route.path
        else:
            for method in getattr(route, "methods", None) or ():
                yield method, prefix + route.path

print(json.dumps(list(walk(app.routes))))
"""


def vllm_routes() -> Iterator[tuple[str, str]]:
    """(method, path) of every route of vLLM's OpenAI server, with every task, router and
    development endpoint it can register (a websocket route as WEBSOCKET)."""
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", ROUTES_SCRIPT, *ALL_TASKS], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    yield from ((method, path) for method, path in json.loads(done.stdout.strip().splitlines()[-1]))


def test_every_route_of_vllms_table_is_metered_allowed_or_refused_by_name() -> None:
    """A route a vLLM upgrade adds fails here until it is metered, allowed (it computes no
    tokens) or listed as refused in wire/edge.py. Refused it already is, whatever is decided."""
    routes = sorted(set(vllm_routes()))
    undecided = [
        (method, path)
        for method, path in routes
        if not edge.vllm_route(method, path).served and path not in edge.VLLM_REFUSED
    ]
    metered = {path for method, path in routes if edge.vllm_route(method, path).endpoint}

    assert undecided == [], f"vLLM routes nobody decided on: meter, allow or refuse each in wire/edge.py: {undecided}"
    assert metered == {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"}
    assert len(routes) > 60  # the table was walked whole: every router was registered
    for method, path in routes:
        served = edge.vllm_route(method, path).served
        assert not (served and path in edge.VLLM_REFUSED), (method, path)


@pytest.mark.parametrize(
    ("method", "path", "endpoint", "served"),
    [
        ("POST", "/v1/chat/completions", "chat.completions", True),
        ("POST", "/v1/chat/completions/", "chat.completions", True),
        ("POST", "/v1/messages", None, False),
        ("POST", "/invocations", None, False),
        ("POST", "/v1/chat/completions/batch", None, False),
        ("GET", "/v1/chat/completions", None, False),
        ("GET", "/v1/responses/resp_123", None, True),
        ("GET", "/v1/responses/..", None, False),
        ("HEAD", "/health", None, True),
        ("OPTIONS", "/v1/chat/completions", None, True),
        ("OPTIONS", "/v1/messages", None, False),
        ("POST", "/reset_prefix_cache", None, False),
        ("GET", "/", None, False),
    ],
)
def test_it_meters_allows_or_refuses_each_route(method: str, path: str, endpoint: str | None, served: bool) -> None:
    assert edge.vllm_route(method, path) == edge.Route(endpoint, served)


# --- the middleware at its ASGI seam -----------------------------------------------------------


class App:
    """vLLM's app as the middleware sees it: records whether a request reached it."""

    def __init__(self) -> None:
        self.reached: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def middleware(app: App) -> CostplatformMiddleware:
    """The middleware with a runtime whose parts a refusal must never reach."""
    mw = CostplatformMiddleware.__new__(CostplatformMiddleware)
    mw.app, mw.runtime = app, SimpleNamespace()
    return mw


def call(mw: CostplatformMiddleware, scope: dict[str, Any], body: bytes = b"") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(mw(scope, receive, send))
    return sent


def http(method: str, path: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": list(headers), "root_path": ""}


def edge_refused(reason: str) -> float:
    return REGISTRY.get_sample_value("costplatform_serving_edge_refused_total", {"reason": reason}) or 0.0


def test_the_middleware_refuses_an_unmetered_route_before_vllm_and_passes_one_that_computes_nothing() -> None:
    app = App()
    before = edge_refused("route_not_metered")

    refused = call(middleware(app), http("POST", "/v1/messages"), b"{}")
    served = call(middleware(app), http("GET", "/health"))

    assert refused[0]["status"] == 404 and json.loads(refused[1]["body"])["error"]["code"] == "route_not_metered"
    assert served[0]["status"] == 200 and app.reached == ["/health"]
    assert edge_refused("route_not_metered") == before + 1


def test_the_middleware_refuses_a_websocket_route_it_does_not_meter() -> None:
    app = App()
    sent: list[dict[str, Any]] = []
    messages = [{"type": "websocket.connect"}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/v1/realtime", "headers": [], "root_path": ""}
    asyncio.run(middleware(app)(scope, receive, send))

    assert app.reached == [] and sent == [{"type": "websocket.close", "code": 1008}]


def test_the_middleware_refuses_two_authorizations_and_a_body_that_is_no_json_object_before_vllm() -> None:
    app = App()
    two = (b"authorization", b"Bearer sk-search"), (b"authorization", b"Bearer anything")

    doubled = call(middleware(app), http("POST", "/v1/chat/completions", *two), b"{}")
    listed = call(middleware(app), http("POST", "/v1/chat/completions"), b"[1, 2]")
    large = call(middleware(app), http("POST", "/v1/chat/completions", (b"content-length", b"99999999999")), b"{}")

    assert [doubled[0]["status"], listed[0]["status"], large[0]["status"]] == [400, 400, 413]
    assert json.loads(doubled[1]["body"])["error"]["code"] == "two_authorizations"
    assert app.reached == []


# --- the trusted dims under the cap ------------------------------------------------------------

MAP = """
[callers.refunds-app]
tokens = ["sk-refunds"]
dims = { business_line = "refunds", team = "cs-bot" }
"""


def refused_claims(dim: str) -> float:
    return REGISTRY.get_sample_value("costplatform_serving_attribution_refused_total", {"dim": dim}) or 0.0


def test_thirty_free_claims_never_push_the_trusted_dims_out_of_the_cap() -> None:
    amap = parse(MAP)
    flood = {f"f{i:02d}": "x" for i in range(40)}
    before = refused_claims("cap")

    decision = decide(flood, amap=amap, caller=amap.caller("sk-refunds"), defaults={"env": "prod", "region": "sh"})
    kept = clean_dims(decision.record_dims())

    assert list(kept)[:5] == ["env", "region", "business_line", "team", "caller"]
    assert (kept["business_line"], kept["team"], kept["caller"]) == ("refunds", "cs-bot", "refunds-app")
    assert len(decision.dims) == len(kept) == MAX_DIMS
    assert set(decision.refused) == {f"f{i:02d}" for i in range(27, 40)}
    assert refused_claims("cap") == before + 13


def test_a_claim_over_the_cap_may_still_change_a_dim_already_kept() -> None:
    amap = parse('[policy]\nbusiness_line = "allowed"\n[default]\nallowed = { business_line = ["ads"] }\n')
    claims = {f"f{i:02d}": "x" for i in range(40)} | {"business_line": "ads"}

    decision = decide(claims, amap=amap, caller=None, defaults={"business_line": "search"})

    assert decision.dims["business_line"] == "ads" and len(decision.dims) == MAX_DIMS
    assert EMPTY.caller(None) is None
