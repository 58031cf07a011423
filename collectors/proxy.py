"""A reverse proxy that records token usage for upstreams that cannot be instrumented (a hosted
API, a vLLM nobody may restart, another engine): OpenAI-compatible ones, and Anthropic-style
ones through POST /v1/messages.

    python -m collectors.proxy --listen 127.0.0.1:8080 --upstream http://127.0.0.1:8000
        [--upstream-key KEY --attribution-map MAP.toml] --spool DIR --platform-url URL --key KEY
        [--tokenizer PATH] [--hash-key-file F] [--model-version V] [--dim business_line=search ...]
        [--budget-poll S [--budget-fail open|closed] [--budget-stale S]
         [--budget-reserve REDIS_URL [--budget-max-tokens N] [--budget-hold S] [--budget-reserve-ttl S]]]

Only the metered endpoints (POST /v1/chat/completions, /v1/completions, /v1/embeddings,
/v1/responses, and Anthropic's /v1/messages) and GET /v1/models(/<id>) are forwarded; any other
path is answered 404 with an OpenAI-style error and never reaches the upstream. As at every
edge (wire/edge.py), a request with two Authorization headers is answered 400 (and so is one
with two x-api-key headers, or with both naming different tokens), a body over 32 MiB 413, and
a metered request whose body is no JSON object 400: none of them is forwarded. With
--upstream-key the proxy spends the operator's key, so a client must present a token of the
attribution map (`Authorization: Bearer <token>` or `x-api-key: <token>`, replaced by the
upstream key on the way: x-api-key on /v1/messages, else Authorization); without one it is
answered 401. Without --upstream-key the client's own key goes upstream and, when the map
knows it, names the caller. Requests are forwarded (hop-by-hop and X-Costplatform-* headers
removed) over one keep-alive connection pool, and the answer is streamed back chunk by chunk as
it arrives: Server-Sent Events are never buffered beyond the event being read. Each metered
request makes one record, built after the response has been sent (in a worker thread, through a
bounded queue) and handed to wire.shipper.Pipeline:

  record_id   px-<uuid>, also returned to the client in X-Costplatform-Record-Id (a client
              retrying sends it back as X-Costplatform-Retry-Of)
  dims        --dim defaults, the caller's dims from the attribution map, then the claims of
              X-Costplatform-<Dim> headers > the body's `metadata` the map lets the caller make
              (business_line and team are the map's unless it says `allowed`); refused claims
              are kept as refused.<dim> and counted
  attempt     X-Costplatform-Attempt / X-Costplatform-Retry-Of
  prompt_hash keyed BLAKE2b of the messages / prompt / input (key: --hash-key-file, else as the
              instrumented server: $COSTPLATFORM_HASH_KEY(_FILE), else a key kept in the spool)
  tokens      the response's usage (a non-streamed answer is scanned as it passes, never held
              whole: collectors/jsonscan.py). A streamed chat or completion request that did not ask for
              usage gets stream_options.include_usage=true upstream, and the usage-only final
              chunk is then taken out of the stream, so the client sees what it asked for.
              Reasoning tokens from usage.completion_tokens_details.reasoning_tokens
              (output_tokens_details on /v1/responses), streamed or not. Prompt-cache
              reads and writes from prompt_tokens_details (cached_tokens, cache_write_tokens)
              or from a usage in Anthropic's shape (input_tokens, which excludes them, with
              cache_read_input_tokens and cache_creation_input_tokens): the record's prompt
              includes both (wire.record.usage_tokens). /v1/messages: Anthropic's usage, a
              stream's from message_start (input and cache counts) merged with message_delta's
              (the final output count, and any count it carries too); stop_reason as the
              finish reason.
              With --tokenizer: system and tool prompt tokens, structural tokens of JSON output
              (response_format json_object/json_schema).
  outcome     2xx ok; 429 rejected; 408/504 and upstream read/connect timeouts timeout; other
              statuses and broken upstreams error; a client that goes away mid-stream aborted,
              with the completion tokens seen so far (streamed deltas, or with --tokenizer the
              streamed text's tokens) and, with --tokenizer, the prompt counted locally.
  timing      e2e, and ttft for streams (first content delta)

With --budget-poll the proxy holds hard budgets (wire/budgets.py, docs/budgets.md): a new
request of a line (or a team or caller of it) whose hard budget is spent is answered 429
here, never forwarded, and recorded as rejected. With --budget-reserve it also reserves each
request's largest use (its prompt bounded by its bytes, plus its max_tokens or
--budget-max-tokens) in the deployment's Redis first (wire/reservations.py), refuses it with
the same 429 when it does not fit, and settles the reservation from its record.

With --otlp-metrics-endpoint (or $COSTPLATFORM_OTLP_METRICS_ENDPOINT) each record's tokens are
also pushed as the OpenTelemetry GenAI token-usage metrics, as the vLLM server pushes its own
(wire/genai_metrics.py), gen_ai.provider.name the upstream's (--otlp-metrics-provider).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from prometheus_client import Counter
from yarl import URL

from collectors.httpserve import (
    RecordSink,
    ServerThread,
    add_attribution_argument,
    add_common_arguments,
    collector_key,
    pipeline_from_args,
    policy_from_args,
    run_app,
)
from collectors.jsonscan import JsonScan
from wire import attribution, edge, genai_metrics
from wire.budgets import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TTL,
    FAIL_MODES,
    BudgetGate,
    Refusal,
    add_reserve_arguments,
    default_hold,
    polling_gate,
)
from wire.record import (
    ANTHROPIC_STOP_REASONS,
    DIM_HEADER_PREFIX,
    PROXY_ENDPOINT_PATHS,
    prompt_tokens,
    usage_reasoning_tokens,
    usage_tokens,
)
from wire.reservations import Reservations

log = logging.getLogger("collectors.proxy")

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
RECORD_ID_HEADER = "X-Costplatform-Record-Id"
API_KEY_HEADER = "x-api-key"  # Anthropic's header of the caller's key
CREDENTIAL_HEADERS = frozenset({"authorization", API_KEY_HEADER})
MAX_KEPT_TEXT = 4 * 1024 * 1024  # of a non-streamed answer's text, kept only for the tokenizer
MAX_QUEUED_RECORDS = 10_000
# The upstream sees only these: the metered endpoints (POST) and the model list (GET).
MODELS_PATH = re.compile(r"^/v1/models(/[^%]+)?$")
INLINE_RECORDS = Counter(
    "costplatform_proxy_records_built_inline",
    "Records built on the event loop without the tokenizer because the record queue was full",
)
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "abort": "abort",
    "error": "error",
    "repetition": "repetition",
}


@dataclass(frozen=True)
class Settings:
    upstream: str
    upstream_key: str | None = None
    tokenizer: Any = None  # a Hugging Face tokenizer, or None
    hash_key: bytes | None = None
    model_version: str | None = None
    defaults: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 10.0
    read_timeout: float = 600.0  # the longest silence from the upstream inside a response
    max_connections: int = 1000
    policy: attribution.Policy = field(default_factory=lambda: attribution.Policy(None))
    max_queued_records: int = MAX_QUEUED_RECORDS
    budgets: BudgetGate | None = None  # hard budgets held here (wire/budgets.py); None: not held
    budget_max_tokens: int = DEFAULT_MAX_TOKENS  # reserved for a request that sets no max_tokens
    token_metrics: genai_metrics.TokenMetrics | None = None  # the GenAI token metrics pushed; None: off


@dataclass
class Exchange(edge.Exchange):
    """What the proxy saw of one tracked request and its answer; becomes one record."""

    started: float = 0.0  # time.monotonic() at arrival
    status_code: int = 0
    outcome: str | None = None  # set when the transfer itself failed: aborted, timeout, error
    streamed: bool = False
    first_token: float | None = None
    finished: float | None = None
    deltas: int = 0
    text: list[str] = field(default_factory=list)
    usage: Mapping[str, Any] | None = None
    finish_reason: str | None = None
    model: str | None = None
    response_status: str | None = None  # /v1/responses: completed, incomplete, failed
    usage_partial: bool = False  # /v1/messages streamed: message_start's usage, no message_delta's yet
    scan: JsonScan | None = None  # reads a non-streamed answer as it passes


# --- reading upstream answers -----------------------------------------------------------------


def split_events(buffer: bytearray) -> list[bytes]:
    """Take the complete Server-Sent Events off the front of `buffer` (each with its blank
    line); an incomplete one stays for the next chunk."""
    events: list[bytes] = []
    start = 0
    while True:
        lf = buffer.find(b"\n\n", start)
        crlf = buffer.find(b"\r\n\r\n", start)
        if lf < 0 and crlf < 0:
            break
        if crlf >= 0 and (lf < 0 or crlf < lf):
            end = crlf + 4
        else:
            end = lf + 2
        events.append(bytes(buffer[start:end]))
        start = end
    del buffer[:start]
    return events


def event_data(event: bytes) -> bytes:
    return b"\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:"))


def observe_choices(exchange: Exchange, doc: Mapping[str, Any], now: float) -> None:
    for choice in doc.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        part = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        tools = isinstance(delta, dict) and (
            delta.get("tool_calls") or delta.get("reasoning") or delta.get("reasoning_content")
        )
        if part or tools:
            exchange.deltas += 1
            exchange.first_token = exchange.first_token or now
            if isinstance(part, str):
                exchange.text.append(part)
        if choice.get("finish_reason"):
            exchange.finish_reason = str(choice["finish_reason"])


def observe_responses_event(exchange: Exchange, doc: Mapping[str, Any], now: float) -> None:
    kind = str(doc.get("type") or "")
    if kind == "response.output_text.delta" and doc.get("delta"):
        exchange.deltas += 1
        exchange.first_token = exchange.first_token or now
        exchange.text.append(str(doc["delta"]))
    elif kind in ("response.completed", "response.incomplete", "response.failed"):
        observe_response_object(exchange, doc.get("response") or {})


def observe_response_object(exchange: Exchange, doc: Mapping[str, Any]) -> None:
    """A /v1/responses Response object: usage in input/output_tokens, status, incomplete reason."""
    exchange.model = str(doc.get("model") or "") or exchange.model
    exchange.response_status = str(doc.get("status") or "") or None
    usage = doc.get("usage")
    if isinstance(usage, Mapping):
        exchange.usage = responses_usage(usage)
    details = doc.get("incomplete_details")
    if isinstance(details, Mapping) and details.get("reason") == "max_output_tokens":
        exchange.finish_reason = "length"
    elif exchange.response_status == "completed":
        exchange.finish_reason = "stop"
    if not exchange.text:
        exchange.text = [c.get("text", "") for c in _output_contents(doc) if isinstance(c.get("text"), str)]


def _output_contents(doc: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for item in doc.get("output") or ():
        if isinstance(item, Mapping):
            if item.get("type") == "function_call":
                yield {"type": "function_call"}
            for content in item.get("content") or ():
                if isinstance(content, Mapping):
                    yield content


def observe_messages_event(exchange: Exchange, doc: Mapping[str, Any], now: float) -> None:
    """An event of Anthropic's streamed Messages answer: message_start carries the input and
    cache counts (and an early output count), the content deltas the text, and message_delta
    the stop reason and the final counts, which replace message_start's where it carries them
    (output_tokens always; input and cache counts in newer versions of the API)."""
    kind = doc.get("type")
    if kind == "message_start" and isinstance(message := doc.get("message"), Mapping):
        exchange.model = str(message.get("model") or "") or exchange.model
        if isinstance(usage := message.get("usage"), Mapping):
            exchange.usage, exchange.usage_partial = dict(usage), True
    elif kind == "content_block_delta" and isinstance(delta := doc.get("delta"), Mapping):
        part = delta.get("text") or delta.get("thinking") or delta.get("partial_json")
        if part:
            exchange.deltas += 1
            exchange.first_token = exchange.first_token or now
            if delta.get("type") == "text_delta" and isinstance(part, str):
                exchange.text.append(part)
    elif kind == "message_delta":
        delta = doc.get("delta")
        if isinstance(delta, Mapping) and delta.get("stop_reason"):
            exchange.finish_reason = str(delta["stop_reason"])
        if isinstance(usage := doc.get("usage"), Mapping):
            final = {name: value for name, value in usage.items() if value is not None}
            exchange.usage, exchange.usage_partial = {**(exchange.usage or {}), **final}, False


def responses_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses API's usage in the chat form wire.record.usage_tokens reads."""
    details = usage.get("input_tokens_details") or {}
    return {
        "prompt_tokens": usage.get("input_tokens") or 0,
        "completion_tokens": usage.get("output_tokens") or 0,
        "prompt_tokens_details": {
            "cached_tokens": details.get("cached_tokens") or 0,
            "cache_write_tokens": details.get("cache_write_tokens") or 0,
        },
        "completion_tokens_details": {"reasoning_tokens": usage_reasoning_tokens(usage)},
    }


class StreamReader:
    """Reads an upstream SSE answer event by event: notes what the record needs and drops the
    usage-only chunk the proxy asked for on the client's behalf."""

    def __init__(self, exchange: Exchange, *, drop_usage_chunk: bool) -> None:
        self.exchange = exchange
        self.drop_usage_chunk = drop_usage_chunk
        self.buffer = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to pass on for this chunk: every complete event except a dropped one."""
        self.buffer += chunk
        events = split_events(self.buffer)
        if not events:
            return b""
        now = time.monotonic()
        out = []
        for event in events:
            if not self._take(event_data(event), now):
                out.append(event)
        return b"".join(out)

    def rest(self) -> bytes:
        rest, self.buffer = bytes(self.buffer), bytearray()
        return rest

    def _take(self, data: bytes, now: float) -> bool:
        """Note an event's data; whether it is to be dropped."""
        if not data or data == b"[DONE]":
            return False
        try:
            doc = json.loads(data)
        except ValueError:
            return False
        if not isinstance(doc, dict):
            return False
        exchange = self.exchange
        if exchange.endpoint == "responses":
            observe_responses_event(exchange, doc, now)
            return False
        if exchange.endpoint == "messages":
            observe_messages_event(exchange, doc, now)
            return False
        exchange.model = exchange.model or doc.get("model")
        if doc.get("usage"):
            exchange.usage = doc["usage"]
        observe_choices(exchange, doc, now)
        return self.drop_usage_chunk and not doc.get("choices") and bool(doc.get("usage"))


def answer_scan(endpoint: str, *, keep_text: bool) -> JsonScan:
    """A scan of a non-streamed answer for what the record needs (the text only for the tokenizer)."""
    text = MAX_KEPT_TEXT if keep_text else 0
    wanted: dict[tuple[str, ...], int]
    repeat: frozenset[tuple[str, ...]]
    if endpoint == "responses":
        wanted = {("status",): 64, ("incomplete_details",): 4096, ("output", "*", "content", "*", "text"): text}
        repeat = frozenset({("output", "*", "content", "*", "text")})
    elif endpoint == "messages":
        wanted = {("stop_reason",): 256, ("content", "*", "text"): text}
        repeat = frozenset({("content", "*", "text")})
    else:
        wanted = {("choices", "*", "finish_reason"): 256, ("choices", "*", "message", "content"): text}
        wanted[("choices", "*", "text")] = text
        repeat = frozenset()
    return JsonScan({("usage",): 64 * 1024, ("model",): 1024, **wanted}, repeat=repeat)


def read_scanned_response(exchange: Exchange, scan: JsonScan) -> None:
    """The usage, model, finish reason and text of a non-streamed JSON answer."""
    if exchange.endpoint == "responses":
        texts = scan.found.get(("output", "*", "content", "*", "text"), [])
        doc = {name: scan.first(name) for name in ("model", "status", "usage", "incomplete_details")}
        doc["output"] = [{"content": [{"text": t} for t in texts if isinstance(t, str)]}]
        observe_response_object(exchange, doc)
        return
    model = scan.first("model")
    exchange.model = str(model) if isinstance(model, str) and model else exchange.model
    if isinstance(scan.first("usage"), Mapping):
        exchange.usage = scan.first("usage")
    if exchange.endpoint == "messages":
        exchange.finish_reason = scan.first("stop_reason") or None
        exchange.text = [t for t in scan.found.get(("content", "*", "text"), []) if isinstance(t, str)]
        return
    if ("choices", "*", "finish_reason") in scan.found:
        exchange.finish_reason = scan.first("choices", "*", "finish_reason") or None
    content = scan.first("choices", "*", "message", "content")
    content = content if content is not None else scan.first("choices", "*", "text")
    if isinstance(content, str):
        exchange.text = [content]


# --- building the record ----------------------------------------------------------------------


def status_of(exchange: Exchange) -> str:
    if exchange.outcome:
        return exchange.outcome
    code = exchange.status_code
    if code == 429:
        return "rejected"
    if code in (408, 504):
        return "timeout"
    if code >= 400 or exchange.response_status == "failed":
        return "error"
    return "ok"


def build_record(exchange: Exchange, settings: Settings) -> dict[str, Any]:
    """The exchange's record (wire.edge.exchange_record) from what the answer said: its usage,
    model, finish reason and text, or, for an answer cut off before its usage, what was
    streamed and the prompt counted here when there is a tokenizer."""
    tokenizer = settings.tokenizer
    if exchange.scan is not None:
        read_scanned_response(exchange, exchange.scan)
    status = status_of(exchange)
    text = "".join(exchange.text)
    tokens = usage_tokens(exchange.usage)
    if not tokens and 200 <= exchange.status_code < 300:
        tokens = {"prompt": prompt_tokens(exchange.body, tokenizer) if tokenizer else 0}
        tokens["completion"] = streamed_completion(exchange, text, tokenizer)
    elif tokens and exchange.usage_partial:  # cut off before message_delta's final output count
        tokens["completion"] = max(tokens["completion"], streamed_completion(exchange, text, tokenizer))
    reasons = ANTHROPIC_STOP_REASONS if exchange.endpoint == "messages" else FINISH_REASONS
    end = exchange.finished or time.monotonic()
    return edge.exchange_record(
        exchange,
        model=str(exchange.model or exchange.body.get("model") or "unknown"),
        tokens=tokens,
        status=status,
        finish_reason="abort" if status == "aborted" else reasons.get(exchange.finish_reason or ""),
        timing={
            "ttft": (exchange.first_token - exchange.started) * 1000 if exchange.first_token else None,
            "e2e": (end - exchange.started) * 1000,
        },
        text=text,
        tokenizer=tokenizer,
        hash_key=settings.hash_key,
        model_version=settings.model_version,
    )


def streamed_completion(exchange: Exchange, text: str, tokenizer: Any) -> int:
    """The completion tokens of what was streamed: its text counted with the tokenizer, else
    its content deltas."""
    counted = len(tokenizer(text, add_special_tokens=False)["input_ids"]) if tokenizer and text else 0
    return counted or exchange.deltas


# --- the proxy --------------------------------------------------------------------------------


def forward_headers(headers: Mapping[str, str], upstream_key: str | None, endpoint: str | None) -> CIMultiDict[str]:
    """The request's headers for the upstream: without hop-by-hop and X-Costplatform-* headers,
    and with --upstream-key without the client's credential, the key sent instead as the
    endpoint's upstream reads it (x-api-key for Anthropic's Messages API, else Authorization)."""
    named = {t.strip().lower() for t in headers.get("Connection", "").split(",") if t.strip()}
    if upstream_key:
        named |= CREDENTIAL_HEADERS
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in named or lower.startswith(DIM_HEADER_PREFIX):
            continue
        # aiohttp has already decompressed a compressed request body.
        if lower == "content-encoding":
            continue
        out.add(name, value)
    if upstream_key and endpoint == "messages":
        out["x-api-key"] = upstream_key
    elif upstream_key:
        out["Authorization"] = f"Bearer {upstream_key}"
    return out


def error_body(message: str, kind: str, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def error_response(status: int, message: str, kind: str, code: str | None = None, **headers: str) -> web.Response:
    return web.Response(
        status=status, body=error_body(message, kind, code), content_type="application/json", headers=headers
    )


def refused_response(refused: edge.Refused, **headers: str) -> web.Response:
    """The answer to a request the edge refused (wire/edge.py)."""
    return web.Response(status=refused.status, body=refused.body(), content_type="application/json", headers=headers)


def forwarded(method: str, path: str) -> bool:
    """Whether a request may reach the upstream: the metered endpoints and the model list."""
    if edge.metered_endpoint(method, path, PROXY_ENDPOINT_PATHS) is not None:
        return True
    segments = path.split("/")
    return method in ("GET", "HEAD") and bool(MODELS_PATH.match(path)) and not {".", ".."} & set(segments)


class Proxy:
    def __init__(self, settings: Settings, sink: RecordSink) -> None:
        self.settings = settings
        self.sink = sink
        # The prompt is reserved by its bytes: the tokenizer belongs to the record builder's thread.
        size = edge.sizer(default_max=settings.budget_max_tokens)
        self.door = edge.Door(settings.policy, defaults=settings.defaults, budgets=settings.budgets, size=size)
        self.observers = edge.observers(metrics=settings.token_metrics, budgets=settings.budgets)
        self.upstream = settings.upstream.rstrip("/").removesuffix("/v1")
        self.session: aiohttp.ClientSession | None = None
        # One thread: tokenizers and the record builder stay off the event loop, in order. The
        # queue is bounded: an exchange holds its request body, so a stalled builder must not
        # hold thousands of them.
        self.records: queue.Queue[Exchange | None] = queue.Queue(maxsize=settings.max_queued_records)
        self.builder = threading.Thread(target=self._build_records, name="proxy-records", daemon=True)
        self.timeout = aiohttp.ClientTimeout(
            total=None, connect=settings.connect_timeout, sock_read=settings.read_timeout
        )

    def app(self) -> web.Application:
        app = web.Application(client_max_size=edge.MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self.handle)  # every path: the unlisted get a 404 in OpenAI's form
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _: web.Application) -> None:
        self.builder.start()
        connector = aiohttp.TCPConnector(limit=self.settings.max_connections, ttl_dns_cache=300)
        # auto_decompress off: compressed answers pass through untouched.
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=self.timeout, skip_auto_headers=("User-Agent",)
        )

    async def _close(self, _: web.Application) -> None:
        if self.session is not None:
            await self.session.close()
        await asyncio.get_running_loop().run_in_executor(None, self._stop_builder)

    def _stop_builder(self) -> None:
        self.records.put(None)
        self.builder.join()

    def _exchange(self, request: web.Request, raw: bytes) -> tuple[Exchange | None, bytes]:
        """The exchange to record (None for an untracked request) and the body to send on;
        edge.Refused for a metered request whose body is no JSON object."""
        endpoint = edge.metered_endpoint(request.method, request.path, PROXY_ENDPOINT_PATHS)
        if endpoint is None:
            return None, raw
        body = edge.json_object(raw)
        exchange = Exchange(
            record_id=f"px-{uuid.uuid4().hex}",
            arrival=time.time(),
            started=time.monotonic(),
            endpoint=endpoint,
            headers=dict(request.headers),
            body=body,
            streamed=bool(body.get("stream")),
        )
        options = body.get("stream_options")
        if exchange.streamed and endpoint in ("chat.completions", "completions"):
            if not (isinstance(options, dict) and options.get("include_usage")):
                sent = dict(body)
                sent["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
                return exchange, json.dumps(sent, ensure_ascii=False).encode()
        return exchange, raw

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not request.raw_path.startswith("/") or request.raw_path.startswith("//"):
            # An absolute-form target (`POST http://host/...`): this is no forward proxy.
            message = "the request target must be a path (origin form), e.g. /v1/chat/completions"
            return error_response(400, message, "invalid_request_error", "invalid_request_target")
        if not forwarded(request.method, request.path):
            message = f"Invalid URL ({request.method} {request.path}): this proxy forwards only the metered endpoints"
            return error_response(404, message, "invalid_request_error")
        try:
            who = self.door.who(request.headers.getall("Authorization", []), request.headers.getall(API_KEY_HEADER, []))
        except edge.Refused as refused:
            return refused_response(refused)
        if who.caller is None and self.settings.upstream_key:
            # The operator's key is spent for known clients only.
            message = "a client token is needed: Authorization: Bearer <token> or x-api-key: <token> (ask the operator)"
            return error_response(
                401, message, "invalid_request_error", "invalid_api_key", **{"WWW-Authenticate": "Bearer"}
            )
        try:
            raw = await request.read()
            exchange, payload = self._exchange(request, raw)
        except web.HTTPRequestEntityTooLarge:
            return refused_response(edge.too_large())
        except edge.Refused as refused:
            return refused_response(refused)
        refusal = await self._admit(exchange, who, request) if exchange is not None else None
        if exchange is not None and refusal is not None:
            return self._refused(exchange, refusal)
        headers = forward_headers(request.headers, self.settings.upstream_key, exchange.endpoint if exchange else None)
        if exchange is not None or "Accept-Encoding" not in headers:
            # The proxy reads the usage out of the answer; and aiohttp would otherwise ask for
            # gzip on the client's behalf and pass it on undecoded.
            headers["Accept-Encoding"] = "identity"
        assert self.session is not None
        url = URL(self.upstream + request.raw_path, encoded=True)
        try:
            upstream = await self.session.request(
                request.method, url, headers=headers, data=payload, allow_redirects=False
            )
        except TimeoutError as exc:
            return self._failed(exchange, "timeout", 504, f"upstream did not answer in time: {exc!r}")
        except aiohttp.ClientError as exc:
            return self._failed(exchange, "error", 502, f"upstream unreachable: {exc!r}")
        try:
            return await self._relay(request, upstream, exchange, inject=payload is not raw)
        finally:
            upstream.release()
            if exchange is not None:
                exchange.finished = exchange.finished or time.monotonic()
                self._record_later(exchange)

    async def _admit(self, exchange: Exchange, who: edge.Who, request: web.Request) -> Refusal | None:
        if self.door.reserves:  # a round trip to the reservations' Redis: off the loop
            return (await asyncio.to_thread(self.door.admit, exchange, who, request.headers))[1]
        return self.door.admit(exchange, who, request.headers)[1]

    def _refused(self, exchange: Exchange, refusal: Refusal) -> web.Response:
        """A new request of a spent hard budget (or, fail-closed, of an unknown budget state):
        answered here, never sent upstream, recorded as rejected with no tokens."""
        exchange.refused()
        exchange.outcome, exchange.status_code, exchange.finished = "rejected", refusal.status, time.monotonic()
        self._record_later(exchange)
        headers = {**refusal.headers, RECORD_ID_HEADER: exchange.record_id}
        return web.Response(status=refusal.status, body=refusal.body, content_type="application/json", headers=headers)

    def _failed(self, exchange: Exchange | None, outcome: str, status: int, message: str) -> web.Response:
        log.warning("%s", message)
        if exchange is not None:
            exchange.outcome, exchange.status_code, exchange.finished = outcome, status, time.monotonic()
            self._record_later(exchange)
        headers = {RECORD_ID_HEADER: exchange.record_id} if exchange else {}
        return error_response(status, message, "proxy_error", **headers)

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, exchange: Exchange | None, *, inject: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        is_sse = upstream.content_type == "text/event-stream"
        for name, value in upstream.headers.items():
            lower = name.lower()
            if lower not in HOP_BY_HOP or (lower == "content-length" and not is_sse):
                response.headers.add(name, value)
        reader = None
        if exchange is not None:
            exchange.status_code = upstream.status
            response.headers[RECORD_ID_HEADER] = exchange.record_id
            if is_sse:
                exchange.streamed = True
                reader = StreamReader(exchange, drop_usage_chunk=inject)
            else:
                exchange.scan = answer_scan(exchange.endpoint, keep_text=self.settings.tokenizer is not None)
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                if reader is not None:
                    chunk = reader.feed(chunk)
                elif exchange is not None and exchange.scan is not None:
                    exchange.scan.feed(chunk)
                if chunk:
                    await response.write(chunk)
            if reader is not None and (rest := reader.rest()):
                await response.write(rest)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError) as exc:
            # The client went away (a write to its closed connection, or aiohttp cancelled the
            # handler): stop reading, and closing the upstream connection tells the engine.
            upstream.close()
            self._mark(exchange, "aborted")
            if isinstance(exc, asyncio.CancelledError):
                raise
        except TimeoutError:
            upstream.close()
            self._mark(exchange, "timeout")
            self._abandon(request)
        except aiohttp.ClientError as exc:
            log.warning("upstream broke off %s: %r", request.path, exc)
            upstream.close()
            self._mark(exchange, "error")
            self._abandon(request)
        return response

    @staticmethod
    def _mark(exchange: Exchange | None, outcome: str) -> None:
        if exchange is not None:
            exchange.outcome = exchange.outcome or outcome
            exchange.finished = time.monotonic()

    @staticmethod
    def _abandon(request: web.Request) -> None:
        """The answer cannot be completed: close the client connection so it sees a cut, not
        a short answer that looks whole."""
        if request.transport is not None:
            request.transport.close()

    def _record_later(self, exchange: Exchange) -> None:
        if not self.builder.is_alive():  # not started, or shutting down: build it here rather than lose it
            self._record(exchange, self.settings)
            return
        try:
            self.records.put_nowait(exchange)
        except queue.Full:
            # The builder is behind: build it now, without the tokenizer (cheap), rather than lose it.
            INLINE_RECORDS.inc()
            self._record(exchange, replace(self.settings, tokenizer=None))

    def _build_records(self) -> None:
        while (exchange := self.records.get()) is not None:
            self._record(exchange, self.settings)

    def _record(self, exchange: Exchange, settings: Settings) -> None:
        try:
            edge.hand_on(build_record(exchange, settings), self.sink, self.observers, exchange.model)
        except Exception:
            log.exception("no record for %s", exchange.record_id)


# --- starting it --------------------------------------------------------------------------------


@contextlib.contextmanager
def proxy_thread(settings: Settings, sink: RecordSink, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """The proxy on its own event loop in a thread, for code that is not asyncio (tests)."""
    with ServerThread(Proxy(settings, sink).app(), host, port) as server:
        yield server.url


def load_tokenizer(path: str | None) -> Any:
    if not path:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_hash_key(path: Path | None, spool: Path) -> bytes:
    if path is not None:
        return path.read_bytes().strip()
    from wire.keys import hash_key

    return hash_key(spool)


def budget_gate(args: argparse.Namespace, key: str) -> BudgetGate | None:
    if not args.budget_poll:
        return None
    reservations = None
    if args.budget_reserve:
        hold = args.budget_hold if args.budget_hold is not None else default_hold(args.budget_poll)
        ttl = args.budget_reserve_ttl if args.budget_reserve_ttl is not None else DEFAULT_TTL
        reservations = Reservations.from_url(args.budget_reserve, ttl=ttl, hold=hold)
    return polling_gate(
        args.platform_url,
        key,
        interval=args.budget_poll,
        fail_closed=args.budget_fail == "closed",
        stale=args.budget_stale,
        reservations=reservations,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m collectors.proxy", description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, listen="127.0.0.1:8080")
    parser.add_argument(
        "--upstream",
        required=True,
        help="the OpenAI-compatible server, e.g. http://127.0.0.1:8000 (an Anthropic-style one for /v1/messages, "
        "e.g. https://api.anthropic.com)",
    )
    parser.add_argument(
        "--upstream-key",
        help="API key sent upstream, as x-api-key on /v1/messages, else Authorization: Bearer "
        "(default: the client's own Authorization or x-api-key)",
    )
    parser.add_argument("--tokenizer", help="Hugging Face tokenizer (path or name) for system/tool/structural counts")
    parser.add_argument("--hash-key-file", type=Path, help="key of the prompt hash (shared with other sources)")
    parser.add_argument("--model-version", help="model_version of every record, e.g. awq-int4")
    parser.add_argument("--connect-timeout", type=float, default=10.0, help="seconds (default %(default)s)")
    parser.add_argument("--read-timeout", type=float, default=600.0, help="longest upstream silence, seconds")
    add_attribution_argument(parser, required=False, tokens="client tokens; required with --upstream-key")
    parser.add_argument(
        "--budget-poll",
        type=float,
        default=0.0,
        help="hold hard budgets: read the platform's budget state every this many seconds and refuse new "
        "requests of a line (or a team or caller of it) whose hard budget is spent with a 429 (docs/budgets.md); "
        "0 = off (default)",
    )
    parser.add_argument(
        "--budget-fail",
        choices=FAIL_MODES,
        default="open",
        help="when the budget state is unknown (platform unreachable): open serves (default), closed refuses (503)",
    )
    parser.add_argument(
        "--budget-stale", type=float, help="seconds a budget state stays usable (default: 4 polls, at least 30)"
    )
    add_reserve_arguments(parser, max_tokens_default=str(DEFAULT_MAX_TOKENS))
    parser.add_argument(
        "--otlp-metrics-endpoint",
        default=genai_metrics.endpoint_from_env(),
        help="push the OpenTelemetry GenAI token-usage metrics of the records to this OTLP/HTTP endpoint "
        f"(default ${genai_metrics.ENV_ENDPOINT}; off without it)",
    )
    parser.add_argument(
        "--otlp-metrics-provider",
        help="their gen_ai.provider.name (default: the upstream's, e.g. openai, anthropic; else openai_compatible)",
    )
    args = parser.parse_args(argv)
    if args.otlp_metrics_endpoint and (missing := genai_metrics.missing_packages()):
        parser.error(f"--otlp-metrics-endpoint needs: pip install {' '.join(missing)}")
    if args.budget_poll < 0:
        parser.error("--budget-poll: seconds, 0 or more")
    if args.budget_reserve and not args.budget_poll:
        parser.error("--budget-reserve needs --budget-poll: the budgets' limits and use come from the platform")
    upstream_key = args.upstream_key or os.environ.get("COSTPLATFORM_UPSTREAM_KEY")
    if upstream_key and not args.attribution_map:
        parser.error("--upstream-key needs --attribution-map: the clients' tokens that may spend it")
    policy = policy_from_args(parser, args)
    pipeline = pipeline_from_args(parser, args)
    settings = Settings(
        upstream=args.upstream,
        upstream_key=upstream_key,
        tokenizer=load_tokenizer(args.tokenizer),
        hash_key=load_hash_key(args.hash_key_file, args.spool),
        model_version=args.model_version,
        defaults=args.dim,
        connect_timeout=args.connect_timeout,
        read_timeout=args.read_timeout,
        policy=policy,
        budgets=budget_gate(args, collector_key(parser, args)),
        budget_max_tokens=args.budget_max_tokens or DEFAULT_MAX_TOKENS,
        token_metrics=genai_metrics.TokenMetrics.from_env(
            endpoint=args.otlp_metrics_endpoint,
            provider=args.otlp_metrics_provider or genai_metrics.provider_of(args.upstream),
            service=genai_metrics.PROXY_SERVICE,
        ),
    )
    if settings.budgets is not None:
        pipeline.on_acked = settings.budgets.acked  # a stored record's use is held only until polled
    run_app(Proxy(settings, pipeline).app(), args.listen, pipeline)


if __name__ == "__main__":
    main()
