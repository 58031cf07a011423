"""Receive OpenTelemetry GenAI spans over OTLP/HTTP and turn them into token records.

    python -m collectors.otlp --listen 127.0.0.1:4318 --spool DIR --platform-url URL --key KEY
        --attribution-map MAP.toml [--dim-prefix costplatform.] [--input-excludes-cache] [--dim env=prod ...]

Every export needs `Authorization: Bearer <token>` with a token of a caller in the attribution map
(wire/attribution.py); a missing or unknown token is answered 401 (google.rpc.Status code 16,
UNAUTHENTICATED) and nothing is recorded; two Authorization headers are answered 400 (wire/edge.py).
The receiver ships every record with its one collector key (--key), so each token the map accepts
writes through that key, within that key's limits.

POST /v1/traces takes an ExportTraceServiceRequest as protobuf (application/x-protobuf) or as
OTLP JSON (application/json: hex trace and span ids, 64-bit integers as strings), optionally
gzip'd. Each inference span (gen_ai.operation.name chat / text_completion / generate_content /
embeddings, or a span with gen_ai.usage.* and no operation name) becomes one record:

  record_id   otlp-<exporter>-<trace_id>-<span_id>, <exporter> the first 8 hex digits of the SHA-256
              of the map's name of the exporter's caller: an exporter's retry is a duplicate, not
              a new record, and one exporter cannot pre-empt another's record with its ids
  ts          span start; timing.e2e = span duration
  model       gen_ai.response.model, else gen_ai.request.model
  tokens      gen_ai.usage.input_tokens -> prompt, output_tokens -> completion,
              cache_read.input_tokens (or the older cache_read_input_tokens) -> prompt_cached,
              cache_creation.input_tokens (or cache_creation_input_tokens) -> prompt_cache_write,
              reasoning tokens -> reasoning (a part of output_tokens; the first present of
              gen_ai.usage.reasoning.output_tokens, gen_ai.usage.reasoning_tokens,
              gen_ai.usage.output_tokens_details.reasoning_tokens, …output_tokens_details.reasoning)
  outcome     span status ERROR or error.type -> error (timeout when error.type says so);
              gen_ai.response.finish_reasons[0] mapped to the record's finish reasons
  dims        resource service.name -> service, deployment.environment(.name) -> env,
              gen_ai.conversation.id -> conversation_id, and every resource then span attribute
              named <prefix><dim> (costplatform.business_line -> business_line); span wins.
              These are the caller's claims: the attribution map decides which stand (business_line
              and team are the map's unless it allows them; the record kind and source never are).
              <prefix>attempt, <prefix>retry_of and <prefix>model_version fill those fields.

Cached tokens: the GenAI conventions say input_tokens INCLUDES cached tokens, as the record's
prompt does, so by default prompt = input_tokens. Some instrumentations (Anthropic's SDK and
those copying its usage object) report input_tokens WITHOUT cache reads and cache writes; run a
receiver for such sources with --input-excludes-cache and prompt = input_tokens +
cache_read.input_tokens + cache_creation.input_tokens.

Agent and tool spans (invoke_agent, create_agent, execute_tool) are skipped even when they
carry usage: instrumentations that put usage there sum their child inference spans, which are
already counted. Other spans (HTTP, database) are skipped too. An inference span that has no
model, or neither usage nor an error, cannot make a record: it is counted in the response's
partial_success.rejected_spans with a reason. The answer is 200 only once the records are
fsync'd in the spool (wire.shipper.Pipeline), 503 with Retry-After when the spool refuses
them, 400 for a body that does not decode, 415 for another content type, 413 for a body over
--max-bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import logging
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from collectors.httpserve import (
    RecordSink,
    add_attribution_argument,
    add_common_arguments,
    pipeline_from_args,
    policy_from_args,
    run_app,
)
from wire import attribution, edge
from wire.record import make_record

log = logging.getLogger("collectors.otlp")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
DEFAULT_PREFIX = "costplatform."
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
DURABLE_TIMEOUT = 10.0  # seconds to wait for the spool's fsync before answering 503

INFERENCE_OPERATIONS = {
    "chat": "chat.completions",
    "text_completion": "completions",
    "generate_content": None,
    "embeddings": "embeddings",
}
FINISH_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "finish_reason_stop": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "error": "error",
    "abort": "abort",
    "cancelled": "abort",
    "repetition": "repetition",
    "recitation": "repetition",
}
# Resource attributes that name a dimension whatever the prefix.
WELL_KNOWN_DIMS = {
    "service.name": "service",
    "deployment.environment.name": "env",
    "deployment.environment": "env",
    "gen_ai.conversation.id": "conversation_id",
}
RECORD_FIELDS = {"attempt", "retry_of", "model_version"}
# From a span's claimed dims to the policy's decision (bound to the exporter's caller).
Decide = Callable[[Mapping[str, str]], attribution.Decision]


@dataclass(frozen=True)
class Options:
    dim_prefix: str = DEFAULT_PREFIX
    input_excludes_cache: bool = False
    defaults: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Conversion:
    records: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, span: Span, reason: str) -> None:
        self.rejected += 1
        if len(self.errors) < 5:
            self.errors.append(f"span {span.span_id.hex() or '?'} ({span.name}): {reason}")


class BodyError(ValueError):
    """The request body is not an ExportTraceServiceRequest in the declared encoding."""


# --- decoding ---------------------------------------------------------------------------------


def decode_body(body: bytes, content_type: str, *, content_encoding: str = "", limit: int = DEFAULT_MAX_BYTES) -> Any:
    """An ExportTraceServiceRequest from a request body; raises BodyError."""
    encoding = content_encoding.strip().lower()
    if encoding == "gzip":
        body = gunzip(body, limit)
    elif encoding not in ("", "identity"):
        raise BodyError(f"Content-Encoding {encoding!r} is not supported; use gzip")
    if content_type == PROTOBUF:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise BodyError(f"not an ExportTraceServiceRequest: {exc}") from exc
        return request
    return decode_json(body)


def gunzip(body: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BodyError(f"body is not valid gzip: {exc}") from exc
    if len(data) > limit or inflater.unconsumed_tail:
        raise BodyError(f"decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise BodyError("body is truncated gzip")
    return data


def decode_json(body: bytes) -> Any:
    """OTLP JSON differs from protobuf's JSON mapping in one way that matters: trace and span
    ids are hex, not base64. They are rewritten, then protobuf parses the rest (camelCase or
    snake_case keys, enums as integers, 64-bit integers as strings)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(f"body is not JSON: {exc}") from exc
    except RecursionError:  # a 400, not a 503 an exporter would retry forever
        raise BodyError("body is JSON nested too deep") from None
    if not isinstance(data, dict):
        raise BodyError("body is not a JSON object")
    for resource_spans in _list(data, "resourceSpans", "resource_spans"):
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            for span in _list(scope_spans, "spans"):
                _hex_ids_to_base64(span)
                for link in _list(span, "links"):
                    _hex_ids_to_base64(link)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise BodyError(f"not an OTLP JSON ExportTraceServiceRequest: {exc}") from exc
    except RecursionError:
        raise BodyError("body is JSON nested too deep") from None
    return request


def _list(obj: Any, *names: str) -> list[Any]:
    if not isinstance(obj, dict):
        return []
    for name in names:
        value = obj.get(name)
        if isinstance(value, list):
            return value
    return []


def _hex_ids_to_base64(obj: Any) -> None:
    if not isinstance(obj, dict):
        return
    for camel, snake in (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id")):
        for key in (camel, snake):
            value = obj.get(key)
            if isinstance(value, str) and value:
                try:
                    obj[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError as exc:
                    raise BodyError(f"{key} {value!r} is not hex") from exc


# --- conversion -------------------------------------------------------------------------------


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return None


def _first(attrs: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if attrs.get(name) not in (None, ""):
            return attrs[name]
    return None


# The GenAI conventions name no reasoning attribute yet; these are the names instrumentations use
# (OpenLLMetry and ADK: reasoning_tokens; OpenAI's usage flattened: output_tokens_details.*), and
# the form the conventions give cache reads. Each counts tokens INSIDE output_tokens, as OpenAI's
# completion_tokens_details.reasoning_tokens does.
REASONING_ATTRIBUTES = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "gen_ai.usage.output_tokens_details.reasoning_tokens",
    "gen_ai.usage.output_tokens_details.reasoning",
)


def span_tokens(attrs: Mapping[str, Any], *, input_excludes_cache: bool) -> dict[str, int] | None:
    """Record token counts from gen_ai.usage.*; None when the span carries no usage at all."""
    prompt = _int(_first(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"))
    completion = _int(_first(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"))
    cached = _int(_first(attrs, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")) or 0
    created = (
        _int(_first(attrs, "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens")) or 0
    )
    if prompt is None and completion is None:
        return None
    prompt = prompt or 0
    if input_excludes_cache:
        prompt += cached + created
    elif cached + created > prompt:
        _warn_once(
            "gen_ai.usage cache reads and writes exceed input_tokens: does this source report input without "
            "cache? (see --input-excludes-cache)"
        )
    reasoning = _int(_first(attrs, *REASONING_ATTRIBUTES)) or 0
    return {
        "prompt": prompt,
        "completion": completion or 0,
        "prompt_cached": cached,
        "prompt_cache_write": created,
        "reasoning": reasoning,
    }


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def span_outcome(span: Span, attrs: Mapping[str, Any]) -> tuple[str, str | None]:
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, str):
        reasons = [reasons]
    finish = None
    if isinstance(reasons, list) and reasons:
        finish = FINISH_REASONS.get(str(reasons[0]).strip().lower())
    error_type = str(attrs.get("error.type") or "")
    if span.status.code == Status.STATUS_CODE_ERROR or error_type:
        described = f"{error_type} {span.status.message}".lower()
        if "timeout" in described or "timed out" in described or "deadline" in described:
            return "timeout", finish
        if "cancel" in described or "abort" in described:
            return "aborted", finish or "abort"
        return "error", finish
    return "ok", finish


def safe_decide(options: Options) -> Decide:
    """The policy with no map and no caller: business_line and team from the defaults only."""
    return lambda claims: attribution.decide(claims, amap=attribution.EMPTY, caller=None, defaults=options.defaults)


def span_dims(
    resource: Mapping[str, Any], attrs: Mapping[str, Any], options: Options, decide: Decide
) -> tuple[dict[str, str], dict[str, str]]:
    """(dims, record fields) from resource then span attributes: the span's own value wins,
    then the attribution policy decides which claims stand."""
    found: dict[str, str] = {}
    fields: dict[str, str] = {}
    prefix = options.dim_prefix
    for source in (resource, attrs):
        for name, value in source.items():
            if value is None or isinstance(value, list | dict):
                continue
            if name in WELL_KNOWN_DIMS:
                found[WELL_KNOWN_DIMS[name]] = str(value)
            elif prefix and name.startswith(prefix) and len(name) > len(prefix):
                key = name[len(prefix) :].replace("-", "_").lower()
                (fields if key in RECORD_FIELDS else found)[key] = str(value)
    # The same cleaning as request metadata: keys the record contract refuses are dropped.
    return decide(found).record_dims(), fields


def is_inference(attrs: Mapping[str, Any]) -> bool:
    operation = attrs.get("gen_ai.operation.name")
    if operation:
        return str(operation) in INFERENCE_OPERATIONS
    return any(str(name).startswith("gen_ai.usage.") for name in attrs)


def exporter_scope(caller: str) -> str:
    """The part of a record id that keeps exporters' ids apart: 8 hex digits of the caller's name."""
    return hashlib.sha256(caller.encode()).hexdigest()[:8]


def span_record(
    span: Span, resource: Mapping[str, Any], options: Options, decide: Decide, exporter: str = ""
) -> dict[str, Any] | str | None:
    """The record of one span; None when it is not an inference span; a reason when it is
    one but cannot make a record."""
    attrs = attributes(span.attributes)
    if not is_inference(attrs):
        return None
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        return "trace_id or span_id missing or of the wrong length"
    model = _first(attrs, "gen_ai.response.model", "gen_ai.request.model")
    if not model:
        return "no gen_ai.response.model or gen_ai.request.model"
    tokens = span_tokens(attrs, input_excludes_cache=options.input_excludes_cache)
    status, finish = span_outcome(span, attrs)
    if tokens is None and status == "ok":
        return "no gen_ai.usage.input_tokens or gen_ai.usage.output_tokens"
    dims, fields = span_dims(resource, attrs, options, decide)
    try:
        attempt = min(max(int(fields.get("attempt", 1)), 1), 1000)
    except ValueError:
        attempt = 1
    duration_ms = (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
    return make_record(
        record_id=f"otlp-{exporter + '-' if exporter else ''}{span.trace_id.hex()}-{span.span_id.hex()}",
        ts=from_unix_nano(span.start_time_unix_nano),
        model=str(model),
        tokens=tokens or {},
        status=status,
        finish_reason=finish,
        endpoint=INFERENCE_OPERATIONS.get(str(attrs.get("gen_ai.operation.name") or "")),
        model_version=fields.get("model_version"),
        dims=dims,
        timing={"e2e": duration_ms} if span.end_time_unix_nano >= span.start_time_unix_nano > 0 else None,
        attempt=attempt,
        retry_of=fields.get("retry_of"),
    )


def from_unix_nano(ns: int) -> datetime:
    seconds, nanos = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=nanos // 1000)


def convert(
    request: Any, options: Options | None = None, *, decide: Decide | None = None, exporter: str = ""
) -> Conversion:
    """Records from every inference span of an ExportTraceServiceRequest; `decide` applies the
    attribution policy of the exporter's caller (default: no map, no caller), `exporter` (its
    exporter_scope) keeps its record ids apart from other exporters'."""
    options = options or Options()
    decide = decide or safe_decide(options)
    result = Conversion()
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                made = span_record(span, resource, options, decide, exporter)
                if isinstance(made, str):
                    result.reject(span, made)
                elif made is not None:
                    result.records.append(made)
    return result


# --- the HTTP receiver ------------------------------------------------------------------------


def rpc_status(code: int, message: str) -> bytes:
    """A google.rpc.Status (code = 1, message = 2) encoded by hand: two fields do not justify
    a dependency on googleapis-common-protos."""
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _reply(
    message: Any, content_type: str, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    if content_type == PROTOBUF:
        body = message.SerializeToString()
    else:
        body = json_format.MessageToJson(message, indent=None).encode()
    return web.Response(body=body, content_type=content_type)


def _error(code: int, http_status: int, message: str, content_type: str, **headers: str) -> web.Response:
    if content_type == PROTOBUF:
        body = rpc_status(code, message)
    else:
        body = json.dumps({"code": code, "message": message}).encode()
    return web.Response(body=body, status=http_status, content_type=content_type, headers=headers)


def _unavailable(message: str, content_type: str) -> web.Response:
    # 503 is retryable for OTLP exporters; Retry-After paces them.
    return _error(14, 503, message, content_type, **{"Retry-After": "5"})


class Receiver:
    """POST /v1/traces: authenticate, decode, convert and make durable off the event loop, then
    answer. Who exports and who pays for each span is the edge's pipeline (wire/edge.py, Door);
    no hard budget holds here: the spans tell of requests already served."""

    def __init__(
        self, sink: RecordSink, options: Options, *, policy: attribution.Policy, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.sink = sink
        self.options = options
        self.door = edge.Door(policy)
        self.max_bytes = max_bytes

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_bytes)
        app.router.add_post("/v1/traces", self.traces)
        return app

    def process(self, body: bytes, content_type: str, content_encoding: str, who: edge.Who) -> tuple[Conversion, int]:
        assert who.caller is not None

        def decide(claims: Mapping[str, str]) -> attribution.Decision:
            return self.door.decide(who, claims)

        request = decode_body(body, content_type, content_encoding=content_encoding, limit=self.max_bytes)
        conversion = convert(request, self.options, decide=decide, exporter=exporter_scope(who.caller.name))
        taken = self.sink.submit_durable(conversion.records, DURABLE_TIMEOUT) if conversion.records else 0
        return conversion, taken

    async def traces(self, request: web.Request) -> web.Response:
        content_type = request.content_type
        if content_type not in (PROTOBUF, JSON):
            return _error(3, 415, f"Content-Type {content_type!r}: use {PROTOBUF} or {JSON}", JSON)
        try:
            who = self.door.who(request.headers.getall("Authorization", []))
        except edge.Refused as refused:
            return _error(3, refused.status, refused.message, content_type)
        if who.caller is None:  # before the body is read: nothing of it is kept
            message = "a bearer token of the attribution map is needed: Authorization: Bearer <token>"
            return _error(16, 401, message, content_type, **{"WWW-Authenticate": "Bearer"})
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(3, 413, f"body over {self.max_bytes} bytes", content_type)
        except web.RequestPayloadError as exc:  # a body that does not decompress
            return _error(3, 400, f"body does not decode: {exc}", content_type)
        loop = asyncio.get_running_loop()
        try:
            # aiohttp has already undone Content-Encoding (gzip, deflate), within client_max_size.
            conversion, taken = await loop.run_in_executor(None, self.process, body, content_type, "", who)
        except BodyError as exc:
            return _error(3, 400, str(exc), content_type)
        except Exception as exc:  # the spool failed: the exporter retries later
            log.exception("records not made durable")
            return _unavailable(f"spool failed: {exc}", content_type)
        if conversion.records and not taken:
            return _unavailable("the spool did not take the records (full, or too slow)", content_type)
        response = ExportTraceServiceResponse()
        lost = len(conversion.records) - taken
        if conversion.rejected or lost:
            response.partial_success.rejected_spans = conversion.rejected + lost
            messages = [*conversion.errors, *([f"{lost} records dropped by a full spool"] if lost else [])]
            response.partial_success.error_message = "; ".join(messages)
        return _reply(response, content_type)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m collectors.otlp", description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, listen="127.0.0.1:4318")
    parser.add_argument("--dim-prefix", default=DEFAULT_PREFIX, help="attribute prefix of dims (default %(default)s)")
    parser.add_argument(
        "--input-excludes-cache",
        action="store_true",
        help="the sources report gen_ai.usage.input_tokens without cached tokens (Anthropic-style)",
    )
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="largest request body, decompressed")
    add_attribution_argument(parser, required=True, tokens="exporters' bearer tokens")
    args = parser.parse_args(argv)
    policy = policy_from_args(parser, args)
    pipeline = pipeline_from_args(parser, args)
    options = Options(dim_prefix=args.dim_prefix, input_excludes_cache=args.input_excludes_cache, defaults=args.dim)
    receiver = Receiver(pipeline, options, policy=policy, max_bytes=args.max_bytes)
    run_app(receiver.app(), args.listen, pipeline)


if __name__ == "__main__":
    main()
