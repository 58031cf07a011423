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
costplatform_serving_edge_refused_total{reason}.

Past those refusals every edge runs one pipeline, here, for each request it meters:

  who = door.who(authorizations)      the caller its one credential names (its Authorization; the
                                      proxy reads an x-api-key too: client_token) (none: no token or
                                      one the map does not know); the proxy and the OTLP
                                      receiver answer 401 where they need a known caller
  door.admit(exchange, who)           the dims it is attributed to (the map's decision over its
                                      claims) and the hard budget's refusal; with reservations,
                                      the request's largest use reserved (wire/reservations.py),
                                      settled from its record (BudgetGate.settle_record)
  exchange_record(exchange, ...)      its record: the counts the edge measured, with what the
                                      request itself says (system, tool and structural tokens,
                                      the prompt hash, the retry chain)
  hand_on(record, sink, observers)    the record into the pipeline (spool and shipper), then to
                                      what watches records (observers()): the GenAI token
                                      metrics (wire/genai_metrics.py) and the budget gate,
                                      which settles the request's reservation

The vLLM middleware (serving/), the proxy and the OTLP receiver (collectors/) keep only what is
their own: how they read a request and its answer, and what they count. Pure Python: no
Django, no vLLM.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import Counter

from wire import record as rec
from wire.attribution import AttributionMap, Caller, Decision, Policy, bearer, decide
from wire.budgets import DEFAULT_MAX_TOKENS, BudgetGate, Refusal
from wire.genai_metrics import TokenMetrics
from wire.record import ENDPOINT_PATHS
from wire.reservations import Need, largest_use

log = logging.getLogger("costplatform.wire")

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
_METERED = {path: Route(endpoint, True) for path, endpoint in ENDPOINT_PATHS.items()}

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


def metered_endpoint(method: str, path: str, paths: Mapping[str, str] = ENDPOINT_PATHS) -> str | None:
    """The record's endpoint of a metered request (POST to one of `paths`: by default the four
    endpoints vLLM serves metered), else None."""
    return paths.get(path.rstrip("/")) if method == "POST" else None


def route_refused(method: str, path: str) -> Refused:
    message = (
        f"Invalid URL ({method} {path}): this server's costplatform edge serves only the metered endpoints "
        f"({', '.join(sorted(ENDPOINT_PATHS))}) and the routes that compute no tokens"
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


def client_token(authorizations: Iterable[str], api_keys: Iterable[str] = ()) -> str | None:
    """The token a request names its caller by: the bearer token of its one Authorization, or its
    one x-api-key (Anthropic's header). Refused (400) for two of either, and for both at once
    unless they carry the same token: exactly one credential decides who pays, whichever one
    the upstream reads."""
    value = authorization(authorizations)
    keys = [key.strip() for key in api_keys]
    if len(keys) > 1:
        raise Refused(400, "two_api_keys", "A request carries one x-api-key header; this one had several.")
    if not keys:
        return bearer(value)
    if value is not None and bearer(value) != keys[0]:
        raise Refused(400, "two_credentials", "A request carries one credential: Authorization or x-api-key, not both.")
    return keys[0] or None


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


# --- the pipeline: who sends it, what it may do, its record ----------------------------------


@dataclass(frozen=True)
class Who:
    """Who sends a request: the caller its token names in the attribution map read for it
    (None: no token, or one the map does not know)."""

    amap: AttributionMap
    caller: Caller | None

    def decide(self, claims: Mapping[str, str], defaults: Mapping[str, str]) -> Decision:
        """The map's decision over what the request claims (wire/attribution.py)."""
        return decide(claims, amap=self.amap, caller=self.caller, defaults=defaults)


@dataclass
class Exchange:
    """What an edge saw of one metered request, from its arrival (time.time()); one record.
    Each edge adds what it watches of the answer."""

    record_id: str
    arrival: float
    endpoint: str
    headers: Mapping[str, str]
    body: dict[str, Any]
    dims: dict[str, str] = field(default_factory=dict)  # decided on arrival (Door.admit)

    def refused(self) -> None:
        """Forget all of the body but its model: nothing is tokenized or hashed of a request
        that was not served."""
        model = self.body.get("model")
        self.body = {"model": model} if model else {}


Sizer = Callable[[Exchange], Need]


def sizer(
    *, default_max: int = DEFAULT_MAX_TOKENS, prompt_tokens: Callable[[Mapping[str, Any]], int] | None = None
) -> Sizer:
    """The largest use of an exchange (wire/reservations.py): its prompt counted by
    `prompt_tokens` (the model's tokenizer; none, or 0: the byte bound) plus its max_tokens
    times its answers, `default_max` where it sets none."""
    count = prompt_tokens or (lambda body: 0)
    return lambda exchange: largest_use(exchange.endpoint, exchange.body, prompt_tokens=count, default_max=default_max)


class Door:
    """What an edge decides of a request before serving it: who sends it, who pays for it, and
    whether a hard budget refuses it (with reservations: whether its largest use, `size`, fits).
    One for the vLLM middleware, the proxy and the OTLP receiver (which holds no budgets: it
    records requests already served)."""

    def __init__(
        self,
        policy: Policy,
        *,
        defaults: Mapping[str, str] | None = None,
        budgets: BudgetGate | None = None,
        size: Sizer | None = None,
    ) -> None:
        self.policy = policy
        self.defaults = dict(policy.defaults if defaults is None else defaults)
        self.budgets = budgets
        self.size = size or sizer()

    @property
    def reserves(self) -> bool:
        """Whether admit() may reserve (a round trip to the store, and maybe tokenizing): an
        async edge then calls it off its event loop."""
        return self.budgets is not None and self.budgets.reserves

    def who(self, authorizations: Iterable[str], api_keys: Iterable[str] = ()) -> Who:
        """The sender of a request's Authorization and x-api-key values (client_token); Refused
        (400) for two credentials or more."""
        amap = self.policy.current()
        return Who(amap, amap.caller(client_token(authorizations, api_keys)))

    def decide(self, who: Who, claims: Mapping[str, str]) -> Decision:
        return who.decide(claims, self.defaults)

    def admit(
        self, exchange: Exchange, who: Who, headers: Mapping[str, str] | None = None
    ) -> tuple[Decision, Refusal | None]:
        """Decide the exchange's dims (from what its headers and body claim; `headers`: every
        value the request carried, when the exchange keeps one a name). The decision, and the
        hard budget's refusal of the request (None: serve it)."""
        claims = rec.claimed_dims(exchange.headers if headers is None else headers, exchange.body)
        decision = self.decide(who, claims)
        exchange.dims = decision.record_dims()
        if self.budgets is None:
            return decision, None
        return decision, self.budgets.check(decision.dims, exchange.record_id, lambda: self.size(exchange))


def exchange_record(
    exchange: Exchange,
    *,
    model: str,
    tokens: Mapping[str, int],
    status: str,
    finish_reason: str | None,
    timing: Mapping[str, float | None],
    text: str = "",
    tokenizer: Any = None,
    hash_key: bytes | None = None,
    model_version: str | None = None,
) -> dict[str, Any]:
    """The record of an exchange: the counts the edge measured (`tokens`, `timing`), with what
    the request itself says: its system and tool prompt tokens and, for a JSON answer (`text`),
    its structural tokens (both with the model's `tokenizer`), the prompt hash (with
    `hash_key`) and the retry chain of its headers. Built off the request's way (the edges'
    record threads): only what the gate needs is decided on arrival."""
    body = exchange.body
    counts = dict(tokens)
    messages = rec.chat_messages(body)
    if tokenizer is not None and messages:
        counts["system"], counts["tool"] = rec.segments_for(tokenizer).count(messages)
    if tokenizer is not None and text and rec.wants_json(body):
        counts["structural"] = rec.structural_tokens(text, tokenizer)
    prompt = rec.prompt_of(body)
    attempt, retry_of = rec.retry_chain(exchange.headers)
    return rec.make_record(
        record_id=exchange.record_id,
        ts=datetime.fromtimestamp(exchange.arrival, UTC),
        model=model,
        tokens=counts,
        status=status,
        finish_reason=finish_reason,
        endpoint=exchange.endpoint,
        model_version=model_version,
        dims=exchange.dims,
        timing=timing,
        attempt=attempt,
        retry_of=retry_of,
        prompt_hash=rec.prompt_hash(prompt, hash_key) if hash_key and prompt is not None else None,
    )


# --- handing the record on -------------------------------------------------------------------


class Sink(Protocol):
    """Where an edge's records go: wire.shipper.Pipeline in production."""

    def submit(self, record: Mapping[str, Any]) -> None: ...


# Told of each record once it is in the pipeline, on the edge's record thread: (record, the model
# that served it where the edge knows it better than the record's model).
RecordObserver = Callable[[dict[str, Any], str | None], None]


def observers(*, metrics: TokenMetrics | None = None, budgets: BudgetGate | None = None) -> list[RecordObserver]:
    """What an edge shows each record to: its GenAI token metrics (when pushed) and its budget
    gate (when it holds budgets), which settles the request's reservation from the record."""
    found: list[RecordObserver] = []
    if metrics is not None:
        found.append(metrics.observe)
    if budgets is not None:
        found.append(lambda record, _model: budgets.settle_record(record))
    return found


def hand_on(
    record: dict[str, Any], sink: Sink, observers: Sequence[RecordObserver], served_model: str | None = None
) -> None:
    """Hand a built record to the pipeline, then show it to the observers: every edge does it
    here, so what the records say and what their metrics say cannot differ between edges. An
    observer that fails is logged and costs neither the record nor the observers after it."""
    sink.submit(record)
    for observe in observers:
        try:
            observe(record, served_model)
        except Exception:
            log.exception("record observer failed")
