"""What every edge refuses before it decides who pays, so the vLLM middleware, the proxy and the
OTLP receiver refuse alike (docs/security.md, "The edge"):

  a route that is not metered  vLLM serves more than the four metered endpoints (/v1/messages,
                               /invocations, /v1/chat/completions/batch, pooling, ...): each of
                               its routes is either metered (gated and attributed), allowed
                               because it computes no tokens, or refused with a 404. The list is
                               an allow-list: a route a vLLM upgrade adds is refused until it is
                               listed (tests/serving/test_edge.py walks vLLM's route table).
  two Authorization headers    vLLM's --api-key check reads the first, other readers the last:
                               exactly one value decides the caller, a second is refused (400).
  a body over MAX_BODY         refused with 413, never passed on unread (it would be ungated).
  a body that is no JSON object  refused with 400 on a metered route: nothing could be decided
                               of it, and the engine must not read it differently.

Each refusal is an OpenAI-style error (`code` says which) and is counted in
costplatform_serving_edge_refused_total{reason}. Pure Python: no Django, no vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from wire.record import ENDPOINTS

MAX_BODY = 32 * 1024 * 1024  # bytes of a request body an edge reads, decompressed

REFUSED = Counter(
    "costplatform_serving_edge_refused",
    "Requests an edge refused before deciding who pays: an unmetered route, two Authorization headers, "
    "a body too large or not a JSON object",
    ["reason"],
)


class Refused(Exception):
    """A request the edge answers itself: status, an OpenAI-style error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        REFUSED.labels(code).inc()

    def body(self) -> bytes:
        error = {"message": self.message, "type": "invalid_request_error", "param": None, "code": self.code}
        return json.dumps({"error": error}).encode()


# --- routes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """What an edge does with a request to a route: meter it (its record's endpoint), pass it
    on (a route that computes no tokens), or refuse it."""

    endpoint: str | None
    served: bool


REFUSE = Route(None, False)
PASS = Route(None, True)
_METERED = {path: Route(endpoint, True) for path, endpoint in ENDPOINTS.items()}

# vLLM 0.32's routes that compute no tokens (GET also answers HEAD; every listed path answers
# the CORS preflight, OPTIONS). `{…}` stands for one path segment.
VLLM_UNMETERED: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/health"),
        ("GET", "/ping"),  # SageMaker's health check
        ("POST", "/ping"),
        ("GET", "/version"),
        ("GET", "/load"),
        ("GET", "/metrics"),  # the reconciliation scrape (collectors/vllm_metrics.py)
        ("GET", "/v1/models"),
        ("POST", "/tokenize"),  # the tokenizer, in the API server: no engine
        ("POST", "/detokenize"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
        ("GET", "/redoc"),
        ("GET", "/v1/responses/{}"),  # a stored (background) response of the metered /v1/responses
        ("POST", "/v1/responses/{}/cancel"),
    }
)

# vLLM 0.32's other routes, refused: listed so that the route-table test tells a route a vLLM
# upgrade adds (refused too, until someone decides) from those already decided.
VLLM_REFUSED: Mapping[str, str] = {
    **dict.fromkeys(
        (
            "/v1/messages",
            "/v1/messages/count_tokens",
            "/invocations",
            "/v1/chat/completions/batch",
            "/inference/v1/generate",
            "/generative_scoring",
            "/v1/systemone",
            "/pooling",
            "/classify",
            "/v2/embed",
            "/score",
            "/v1/score",
            "/rerank",
            "/v1/rerank",
            "/v2/rerank",
            "/v1/audio/transcriptions",
            "/v1/audio/translations",
            "/v1/realtime",
        ),
        "reaches the engine unmetered: not attributed, not gated by budgets",
    ),
    **dict.fromkeys(
        (
            "/v1/chat/completions/render",
            "/v1/messages/render",
            "/v1/completions/render",
            "/v1/responses/render",
            "/v1/chat/completions/derender",
            "/v1/completions/derender",
        ),
        "renders prompts for another server: not needed by a metered client",
    ),
    **dict.fromkeys(
        (
            "/kv_event_sources",
            "/server_info",
            "/reset_prefix_cache",
            "/reset_mm_cache",
            "/reset_encoder_cache",
            "/collective_rpc",
            "/sleep",
            "/wake_up",
            "/is_sleeping",
            "/release_kv_cache_memory",
            "/pause",
            "/resume",
            "/is_paused",
            "/abort_requests",
            "/inference/v1/abort_requests",
            "/init_weight_transfer_engine",
            "/shutdown_weight_transfer_engine",
            "/start_weight_update",
            "/start_draft_weight_update",
            "/update_weights",
            "/finish_weight_update",
            "/update_weight_version",
            "/weight_info",
            "/weight_checker",
            "/get_world_size",
            "/scale_elastic_ep",
            "/is_scaling_elastic_ep",
            "/fault_tolerance/apply",
            "/fault_tolerance/status",
        ),
        "operates the server (development mode, scaling, fault tolerance): not a client's",
    ),
}


_STATIC = {route for route in VLLM_UNMETERED if "{}" not in route[1]}
_TEMPLATED = [(method, tuple(path.split("/"))) for method, path in VLLM_UNMETERED if "{}" in path]
_PATHS = {path for _, path in VLLM_UNMETERED} | set(_METERED)


def _unmetered(method: str, path: str) -> bool:
    if (method, path) in _STATIC:
        return True
    parts = path.split("/")
    return any(
        m == method and len(template) == len(parts) and all(_fits(t, p) for t, p in zip(template, parts, strict=True))
        for m, template in _TEMPLATED
    )


def _fits(template: str, part: str) -> bool:
    return template == part or (template == "{}" and part not in ("", ".", ".."))


def _template_of(path: str) -> str:
    """`/v1/responses/{response_id}` -> `/v1/responses/{}` (a route table's path)."""
    return "/".join("{}" if part.startswith("{") and part.endswith("}") else part for part in path.split("/"))


def vllm_route(method: str, path: str) -> Route:
    """What the vLLM middleware does with `method path` (the path without vLLM's root path)."""
    path = _template_of(path.rstrip("/")) if "{" in path else path.rstrip("/")
    if method == "POST" and path in _METERED:
        return _METERED[path]
    if method == "HEAD":
        method = "GET"
    if _unmetered(method, path):
        return PASS
    if method == "OPTIONS" and (path in _PATHS or _unmetered("GET", path) or _unmetered("POST", path)):
        return PASS  # CORS preflight: answered by vLLM's CORS middleware, never the engine
    return REFUSE


def metered_endpoint(method: str, path: str) -> str | None:
    """The record's endpoint of a metered request (POST to one of the four endpoints), else None."""
    return _METERED[path.rstrip("/")].endpoint if method == "POST" and path.rstrip("/") in _METERED else None


def route_refused(method: str, path: str) -> Refused:
    message = (
        f"Invalid URL ({method} {path}): this server's costplatform edge serves only the metered endpoints "
        f"({', '.join(sorted(ENDPOINTS))}) and the routes that compute no tokens"
    )
    return Refused(404, "route_not_metered", message)


# --- the caller's credential ---------------------------------------------------------------


def authorization(values: Iterable[str]) -> str | None:
    """The one Authorization value of a request, None when there is none; Refused (400) when
    there are two or more: vLLM's own key check reads the first, a dict of headers the last,
    so with two the caller billed need not be the caller authenticated."""
    found = list(values)
    if len(found) > 1:
        raise Refused(400, "two_authorizations", "A request carries one Authorization header; this one had several.")
    return found[0] if found else None


def authorization_of(raw_headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """authorization() of an ASGI scope's raw headers."""
    return authorization(v.decode("latin-1") for k, v in raw_headers if k.lower() == b"authorization")


# --- the body --------------------------------------------------------------------------------


def too_large(limit: int = MAX_BODY) -> Refused:
    return Refused(413, "body_too_large", f"The request body is over {limit} bytes.")


def declared_too_large(content_length: str | None, limit: int = MAX_BODY) -> bool:
    """Whether a Content-Length already says the body is over the limit."""
    try:
        return content_length is not None and int(content_length) > limit
    except ValueError:
        return False


def json_object(raw: bytes) -> dict[str, Any]:
    """The body of a metered request: a JSON object, else Refused (400)."""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise Refused(400, "body_not_json", "The request body must be a JSON object.")
    return body
