"""OTLP/HTTP GenAI spans -> token records: both encodings, the receiver's answers, durability,
and spans from the real OpenTelemetry SDK exporter reaching a real costplatform."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from prometheus_client import REGISTRY, CollectorRegistry

from collectors.httpserve import ServerThread
from collectors.otlp import REASONING_ATTRIBUTES, BodyError, Options, Receiver, convert, decode_body, exporter_scope
from wire import attribution
from wire.shipper import Pipeline

FIXTURE = Path(__file__).parent / "fixtures" / "otlp_genai_traces.json"
TOKEN, OTHER_TOKEN = "otlp-token", "otlp-token-of-another-exporter"
# The lines these spans claim are allowed (to the default caller for the conversion tests, which
# have no exporter); the exporter with TOKEN is billed to support unless it claims search.
MAP = f"""
[policy]
business_line = "allowed"
team = "allowed"

[default]
allowed = {{ business_line = ["after-sales", "search", "ads"], team = ["cs-bot", "search"] }}

[callers.audit-exporter]
tokens = ["{OTHER_TOKEN}"]
dims = {{ business_line = "search" }}

[callers.support-exporter]
tokens = ["{TOKEN}"]
dims = {{ business_line = "support" }}
allowed = {{ business_line = ["search"] }}
"""
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}
T0 = 1_767_268_800_000_000_000  # 2026-01-01T12:00:00Z in nanoseconds


class Taken:
    """The receiver's sink seam (wire.shipper.Pipeline in production, tested below too)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def submit(self, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))

    def submit_durable(self, records: Iterable[Mapping[str, Any]], timeout: float | None = None) -> int:
        batch = [dict(r) for r in records]
        self.records += batch
        return len(batch)


def kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, list):
        return KeyValue(
            key=key, value=AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in value]))
        )
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def genai_span(span_id: int, *, start: int = T0, duration_ms: int = 250, status: int = 0, **attrs: Any) -> Span:
    return Span(
        trace_id=bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736"),
        span_id=span_id.to_bytes(8, "big"),
        name="chat",
        kind=Span.SpanKind.SPAN_KIND_CLIENT,
        start_time_unix_nano=start,
        end_time_unix_nano=start + duration_ms * 1_000_000,
        attributes=[kv(k.replace("__", "."), v) for k, v in attrs.items()],
        status=Status(code=status),
    )


def export_request(*spans: Span, **resource: str) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=[kv(k.replace("__", "."), v) for k, v in resource.items()]),
                scope_spans=[ScopeSpans(spans=list(spans))],
            )
        ]
    )


def chat_span(span_id: int = 1, **attrs: Any) -> Span:
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "qwen2.5-7b-instruct",
        "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 120,
        "gen_ai.usage.cache_read.input_tokens": 600,
        "gen_ai.response.finish_reasons": ["stop"],
    }
    return genai_span(span_id, **{k.replace(".", "__"): v for k, v in (base | attrs).items()})


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """The OTLP JSON encoding of a request: protobuf's JSON mapping with hex ids."""
    data = json_format.MessageToDict(request)
    for resource_spans in data["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(data).encode()


def choosing(options: Options | None = None) -> Any:
    """The policy of MAP for a span of no exporter in particular."""
    defaults = (options or Options()).defaults
    return lambda claims: attribution.decide(claims, amap=attribution.parse(MAP), caller=None, defaults=defaults)


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> attribution.Policy:
    path = tmp_path_factory.mktemp("otlp-map") / "attribution.toml"
    path.write_text(MAP)
    return attribution.Policy(path)


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["record_id"].rsplit("-", 1)[1]: r for r in records}


# --- conversion -------------------------------------------------------------------------------


def test_it_turns_each_genai_inference_span_of_the_json_fixture_into_a_record():
    result = convert(decode_body(FIXTURE.read_bytes(), "application/json"), decide=choosing())

    records = by_id(result.records)
    assert sorted(records) == ["00f067aa0ba902b7", "b7ad6b7169203331", "c7ad6b7169203332", "eee19b7ec3c1b174"]
    assert records["eee19b7ec3c1b174"] == {
        "record_id": "otlp-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174",
        "ts": "2026-01-01T12:00:00.123456+00:00",
        "model": "qwen2.5-7b-instruct-0925",
        "endpoint": "chat.completions",
        "tokens": {"prompt": 1200, "completion": 180, "prompt_cached": 512},
        "outcome": {"status": "ok", "finish_reason": "stop"},
        "dims": {
            "service": "support-bot",
            "env": "prod",
            "business_line": "after-sales",  # the span's attribute wins over the resource's
            "team": "cs-bot",
            "conversation_id": "conv-42",
            "feature": "faq",
        },
        "timing": {"e2e": 930},
        "attempt": 2,
        "retry_of": "otlp-first-try",
    }
    assert records["c7ad6b7169203332"]["tokens"] == {"prompt": 64, "completion": 0}
    assert records["c7ad6b7169203332"]["endpoint"] == "embeddings"


def test_it_skips_agent_and_plain_spans_and_rejects_a_chat_span_without_a_model():
    result = convert(decode_body(FIXTURE.read_bytes(), "application/json"))

    assert not {"d7ad6b7169203333", "e7ad6b7169203334"} & set(by_id(result.records))  # invoke_agent, GET
    assert result.rejected == 1
    assert "f7ad6b7169203335" in result.errors[0] and "model" in result.errors[0]


def test_it_records_a_timed_out_span_without_usage_as_a_timeout():
    records = by_id(convert(decode_body(FIXTURE.read_bytes(), "application/json")).records)

    timed_out = records["b7ad6b7169203331"]
    assert timed_out["outcome"] == {"status": "timeout"}
    assert timed_out["tokens"] == {"prompt": 0, "completion": 0}
    assert timed_out["timing"] == {"e2e": 30000}


def test_it_takes_input_tokens_as_including_cached_ones_by_default():
    records = by_id(convert(export_request(chat_span())).records)

    assert records["0000000000000001"]["tokens"] == {"prompt": 900, "completion": 120, "prompt_cached": 600}


@pytest.mark.parametrize("name", REASONING_ATTRIBUTES)
def test_it_takes_reasoning_tokens_as_a_part_of_the_output(name):
    records = by_id(convert(export_request(chat_span(**{name: 80}))).records)

    assert records["0000000000000001"]["tokens"] == {
        "prompt": 900,
        "completion": 120,
        "prompt_cached": 600,
        "reasoning": 80,
    }


@pytest.mark.parametrize(
    "name", ["gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens"]
)
def test_it_takes_cache_creation_tokens_as_the_prompts_cache_writes(name):
    # The conventions' input_tokens include cache reads and writes: 900 = 600 read + 250 written + 50.
    records = by_id(convert(export_request(chat_span(**{name: 250}))).records)

    assert records["0000000000000001"]["tokens"] == {
        "prompt": 900,
        "completion": 120,
        "prompt_cached": 600,
        "prompt_cache_write": 250,
    }


def test_it_caps_cache_writes_at_the_input_the_cache_reads_leave():
    records = by_id(convert(export_request(chat_span(**{"gen_ai.usage.cache_creation.input_tokens": 500}))).records)

    assert records["0000000000000001"]["tokens"]["prompt_cache_write"] == 300


def test_it_caps_reasoning_at_the_output_a_span_reports():
    records = by_id(convert(export_request(chat_span(**{"gen_ai.usage.reasoning_tokens": 500}))).records)

    assert records["0000000000000001"]["tokens"]["reasoning"] == 120


def test_it_adds_cache_reads_and_writes_to_input_for_sources_that_exclude_them():
    options = Options(input_excludes_cache=True)
    result = convert(decode_body(FIXTURE.read_bytes(), "application/json"), options)

    # Anthropic-style: 300 uncached input + 1000 read from the cache + 200 written to it.
    assert by_id(result.records)["00f067aa0ba902b7"]["tokens"] == {
        "prompt": 1500,
        "completion": 40,
        "prompt_cached": 1000,
        "prompt_cache_write": 200,
    }
    assert by_id(result.records)["00f067aa0ba902b7"]["outcome"] == {"status": "ok", "finish_reason": "length"}


def test_it_never_lets_cached_exceed_prompt_for_a_source_that_excludes_cache_read_as_inclusive():
    tokens = by_id(convert(decode_body(FIXTURE.read_bytes(), "application/json")).records)["00f067aa0ba902b7"]["tokens"]

    assert tokens == {"prompt": 300, "completion": 40, "prompt_cached": 300}


def test_it_reads_the_same_records_from_protobuf_and_from_json():
    request = export_request(
        chat_span(1, **{"costplatform.business_line": "search", "gen_ai.response.model": "qwen-0925"}),
        chat_span(2, **{"gen_ai.operation.name": "text_completion", "error.type": "500"}),
        **{"service.name": "search-api", "costplatform.team": "search"},
    )

    from_protobuf = convert(decode_body(request.SerializeToString(), "application/x-protobuf"), decide=choosing())
    from_json = convert(decode_body(otlp_json(request), "application/json"), decide=choosing())

    assert from_protobuf.records == from_json.records
    first, second = from_protobuf.records
    assert first["record_id"] == "otlp-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000001"
    assert first["ts"] == "2026-01-01T12:00:00+00:00"
    assert (first["model"], first["dims"]) == (
        "qwen-0925",
        {"service": "search-api", "team": "search", "business_line": "search"},
    )
    assert (second["endpoint"], second["outcome"]) == ("completions", {"status": "error", "finish_reason": "stop"})


@pytest.mark.parametrize(
    ("attrs", "status", "outcome"),
    [
        ({"gen_ai.response.finish_reasons": ["end_turn"]}, 0, {"status": "ok", "finish_reason": "stop"}),
        ({"gen_ai.response.finish_reasons": ["tool_use"]}, 0, {"status": "ok", "finish_reason": "tool_calls"}),
        ({"gen_ai.response.finish_reasons": ["MAX_TOKENS"]}, 0, {"status": "ok", "finish_reason": "length"}),
        ({"gen_ai.response.finish_reasons": ["content_filter"]}, 0, {"status": "ok"}),
        ({"gen_ai.response.finish_reasons": []}, 2, {"status": "error"}),
        ({"gen_ai.response.finish_reasons": [], "error.type": "ReadTimeout"}, 0, {"status": "timeout"}),
        (
            {"gen_ai.response.finish_reasons": [], "error.type": "CancelledError"},
            2,
            {"status": "aborted", "finish_reason": "abort"},
        ),
    ],
)
def test_it_maps_finish_reasons_and_span_status(attrs, status, outcome):
    span = chat_span(**attrs)
    span.status.code = status

    assert convert(export_request(span)).records[0]["outcome"] == outcome


def test_it_takes_dims_with_a_configured_prefix_and_defaults():
    span = chat_span(**{"acme.business_line": "ads", "costplatform.team": "ignored-prefix"})
    options = Options(dim_prefix="acme.", defaults={"env": "staging"})

    dims = convert(export_request(span), options, decide=choosing(options)).records[0]["dims"]
    assert dims == {"env": "staging", "business_line": "ads"}


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\xff\xff\xff", "application/x-protobuf"),
        (b"{not json", "application/json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "application/json"),
        (b'{"resourceSpans": "many"}', "application/json"),
    ],
)
def test_it_refuses_bodies_that_do_not_decode(body, content_type):
    with pytest.raises(BodyError):
        decode_body(body, content_type)


# --- the HTTP receiver ------------------------------------------------------------------------


def post(url: str, body: bytes, content_type: str, **headers: str | None) -> tuple[int, str, bytes]:
    sent = {"Content-Type": content_type, **AUTHORIZED, **headers}
    request = urllib.request.Request(
        f"{url}/v1/traces", data=body, headers={k: v for k, v in sent.items() if v is not None}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


@pytest.fixture
def receiver_url(policy):
    sink = Taken()
    with ServerThread(Receiver(sink, Options(), policy=policy).app()) as server:
        server.sink = sink  # type: ignore[attr-defined]
        yield server


def test_it_answers_gzipped_protobuf_with_an_export_response_counting_rejected_spans(receiver_url):
    request = export_request(chat_span(1), chat_span(2, **{"gen_ai.request.model": ""}))

    status, content_type, body = post(
        receiver_url.url,
        gzip.compress(request.SerializeToString()),
        "application/x-protobuf",
        **{"Content-Encoding": "gzip"},
    )

    assert (status, content_type) == (200, "application/x-protobuf")
    answer = ExportTraceServiceResponse.FromString(body)
    assert answer.partial_success.rejected_spans == 1
    assert "0000000000000002" in answer.partial_success.error_message
    assert [r["record_id"][-4:] for r in receiver_url.sink.records] == ["0001"]


def test_it_answers_json_in_json_without_partial_success_when_all_spans_were_used(receiver_url):
    status, content_type, body = post(receiver_url.url, otlp_json(export_request(chat_span())), "application/json")

    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {}
    assert len(receiver_url.sink.records) == 1


def test_it_answers_400_with_a_status_for_an_undecodable_body(receiver_url):
    status, _, body = post(receiver_url.url, b"{oops", "application/json")
    gz_status, _, _ = post(receiver_url.url, b"not gzip", "application/x-protobuf", **{"Content-Encoding": "gzip"})

    assert (status, gz_status) == (400, 400)
    assert json.loads(body)["code"] == 3
    assert receiver_url.sink.records == []


def test_it_answers_415_for_another_content_type(receiver_url):
    status, _, _ = post(receiver_url.url, b"<spans/>", "application/xml")

    assert status == 415


def refused_count(dim: str) -> float:
    return REGISTRY.get_sample_value("costplatform_serving_attribution_refused_total", {"dim": dim}) or 0.0


@pytest.mark.parametrize("authorization", [None, "Bearer not-in-the-map", f"Basic {TOKEN}"])
@pytest.mark.parametrize("content_type", ["application/x-protobuf", "application/json"])
def test_it_refuses_an_export_without_a_bearer_token_of_the_map(receiver_url, authorization, content_type):
    request = export_request(chat_span())
    body = request.SerializeToString() if content_type == "application/x-protobuf" else otlp_json(request)

    status, answered_as, answer = post(receiver_url.url, body, content_type, Authorization=authorization)

    assert (status, answered_as) == (401, content_type)
    if content_type == "application/json":
        assert json.loads(answer)["code"] == 16  # UNAUTHENTICATED
    else:
        assert answer.startswith(b"\x08\x10")  # google.rpc.Status code 16
    assert receiver_url.sink.records == []


def test_it_bills_an_exporter_claiming_another_line_to_its_own_and_keeps_the_claim(receiver_url):
    before = refused_count("business_line")
    request = export_request(
        chat_span(1, **{"costplatform.business_line": "payments"}),
        chat_span(2),
        **{"costplatform.business_line": "payments"},  # the resource's claim
    )

    status, _, _ = post(receiver_url.url, request.SerializeToString(), "application/x-protobuf")

    assert status == 200
    for record in receiver_url.sink.records:
        assert record["dims"]["business_line"] == "support"
        assert record["dims"]["refused.business_line"] == "payments"
    assert len(receiver_url.sink.records) == 2 and refused_count("business_line") == before + 2


def test_it_never_lets_an_exporter_make_a_reconciliation_record(receiver_url):
    span = chat_span(**{"costplatform.costplatform.kind": "reconciliation", "costplatform.source": "vllm-1"})

    post(receiver_url.url, export_request(span).SerializeToString(), "application/x-protobuf")

    (record,) = receiver_url.sink.records
    assert "costplatform.kind" not in record["dims"] and "source" not in record["dims"]
    assert record["dims"]["refused.costplatform.kind"] == "reconciliation"


def pipeline(tmp_path: Path, url: str = "http://127.0.0.1:9", **options: Any) -> Pipeline:
    return Pipeline(tmp_path / "spool", url=url, key="cpk_test", registry=CollectorRegistry(), **options)


def test_it_answers_only_once_the_records_are_in_the_spool_files(tmp_path, policy):
    with pipeline(tmp_path, ship=False) as sink, ServerThread(Receiver(sink, Options(), policy=policy).app()) as server:
        status, _, _ = post(server.url, export_request(chat_span(7)).SerializeToString(), "application/x-protobuf")

        on_disk = b"".join(p.read_bytes() for p in (tmp_path / "spool").rglob("*") if p.is_file())
        assert status == 200
        scope = exporter_scope("support-exporter")
        assert f"otlp-{scope}-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000007".encode() in on_disk


def test_it_answers_503_when_the_spool_refuses_the_records(tmp_path, policy):
    with (
        pipeline(tmp_path, ship=False, when_full="refuse", max_bytes=1, segment_bytes=1) as sink,
        ServerThread(Receiver(sink, Options(), policy=policy).app()) as server,
    ):
        status, _, _ = post(server.url, export_request(chat_span()).SerializeToString(), "application/x-protobuf")

    assert status == 503


# --- end to end -------------------------------------------------------------------------------


@pytest.mark.usefixtures("truncate_records")
def test_it_delivers_spans_from_the_opentelemetry_sdk_exporter_to_the_platform(live_server, tmp_path, policy):
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource as SdkResource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import SpanKind, StatusCode

    from apps.ingest.models import Record
    from tests.factories import collector_key

    key = collector_key()
    with (
        Pipeline(tmp_path / "spool", url=live_server.url, key=key.secret, registry=CollectorRegistry()) as sink,
        ServerThread(Receiver(sink, Options(), policy=policy).app()) as server,
    ):
        provider = TracerProvider(
            resource=SdkResource.create({"service.name": "kb-search", "costplatform.business_line": "search"})
        )
        provider.add_span_processor(
            SimpleSpanProcessor(
                OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", compression=Compression.Gzip, headers=AUTHORIZED)
            )
        )
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("chat qwen", kind=SpanKind.CLIENT) as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "qwen2.5-7b-instruct",
                    "gen_ai.usage.input_tokens": 700,
                    "gen_ai.usage.output_tokens": 90,
                    "gen_ai.usage.cache_read.input_tokens": 256,
                    "gen_ai.usage.reasoning_tokens": 60,
                    "gen_ai.response.finish_reasons": ("length",),
                    "costplatform.feature": "answer",
                }
            )
            trace_id = span.get_span_context().trace_id
        with tracer.start_as_current_span("chat qwen", kind=SpanKind.CLIENT) as failed:
            failed.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "qwen2.5-7b-instruct"})
            failed.set_attribute("error.type", "InternalServerError")
            failed.set_status(StatusCode.ERROR)
        provider.shutdown()
        assert sink.flush(10)

    stored = {r.get_status_display(): r for r in Record.objects.filter(source=key.key).select_related("model", "dims")}
    assert sorted(stored) == ["error", "ok"]
    ok = stored["ok"]
    assert ok.record_id.startswith(f"otlp-{exporter_scope('support-exporter')}-{trace_id:032x}-")
    assert (ok.prompt, ok.prompt_cached, ok.completion, ok.reasoning) == (700, 256, 90, 60)
    assert ok.model.name == "qwen2.5-7b-instruct"
    assert ok.get_finish_reason_display() == "length"
    # The exporter's token names its caller in the map: the platform records it as `caller`.
    assert ok.dims.dims == {
        "service": "kb-search",
        "business_line": "search",
        "feature": "answer",
        "caller": "support-exporter",
    }
    assert (stored["error"].prompt, stored["error"].completion) == (0, 0)


def test_thirty_claimed_attributes_never_push_the_exporters_caller_out_of_its_record(receiver_url):
    """Issue 31, finding 4: the trusted dims are kept first, claims over the 32-dim cap refused."""
    before = refused_count("cap")
    flood = {f"costplatform.f{i:02d}": "x" for i in range(30)}
    request = export_request(chat_span(**flood), **{"service__name": "checkout"})

    status, _, _ = post(receiver_url.url, request.SerializeToString(), "application/x-protobuf")

    assert status == 200
    (record,) = receiver_url.sink.records
    assert (record["dims"]["caller"], record["dims"]["business_line"]) == ("support-exporter", "support")
    assert len(record["dims"]) == 32 and refused_count("cap") == before + 1


def test_it_refuses_an_export_with_two_authorization_headers(receiver_url):
    """Issue 31, finding 2: exactly one Authorization decides the exporter."""
    import http.client
    from urllib.parse import urlsplit

    body = export_request(chat_span()).SerializeToString()
    parts = urlsplit(receiver_url.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.putrequest("POST", "/v1/traces")
    for name, value in [("Content-Type", "application/x-protobuf"), ("Content-Length", str(len(body))),
                        ("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer anything")]:  # fmt: skip
        conn.putheader(name, value)
    conn.endheaders(body)
    status = conn.getresponse().status
    conn.close()

    assert status == 400 and receiver_url.sink.records == []


@pytest.mark.parametrize("depth", [300, 100_000])
def test_it_answers_400_not_503_to_json_nested_too_deep(receiver_url, depth):
    """Issue 31, a Low: a RecursionError was answered 503, which exporters retry forever."""
    arrays = b'{"resourceSpans": ' + b"[" * depth + b"]" * depth + b"}"
    value = b'{"kvlistValue": {"values": [{"key": "k", "value": ' * depth + b"{}" + b"}]}}" * depth
    attribute = b'{"resourceSpans": [{"resource": {"attributes": [{"key": "costplatform.f", "value": ' + value
    attribute += b"}]}}]}"

    answers = [post(receiver_url.url, body, "application/json") for body in (arrays, attribute)]

    assert [status for status, _, _ in answers] == [400, 400], answers
    assert all(json.loads(body)["code"] == 3 for _, _, body in answers)


def test_one_exporter_cannot_pre_empt_anothers_record_ids(receiver_url):
    """Issue 31, a Low: record ids (otlp-<trace>-<span>) were shared by every exporter, so one
    exporter's span made another's real one a duplicate."""
    span = export_request(chat_span(9)).SerializeToString()

    post(receiver_url.url, span, "application/x-protobuf", Authorization=f"Bearer {OTHER_TOKEN}")
    post(receiver_url.url, span, "application/x-protobuf")
    post(receiver_url.url, span, "application/x-protobuf")  # the support exporter's retry

    ids = [r["record_id"] for r in receiver_url.sink.records]
    assert len(set(ids)) == 2 and ids[1] == ids[2]
    assert ids[0].startswith(f"otlp-{exporter_scope('audit-exporter')}-") and ids[0] != ids[1]
