"""The OpenAI-compatible proxy in front of a real loopback upstream (tests/collectors/openai_upstream.py):
what the client and the upstream see, and the record each request makes."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from collectors.httpserve import ServerThread
from collectors.proxy import INLINE_RECORDS, Settings, proxy_thread
from tests.collectors.openai_upstream import CACHED_TOKENS, PROMPT_TOKENS, WORDS, Upstream
from wire import edge
from wire.attribution import Policy
from wire.record import prompt_hash
from wire.shipper import Pipeline

HASH_KEY = b"k" * 32
CHAT_TEMPLATE = "{% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}" + (
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
CLIENT_TOKEN = "client-key"
# The proxy spends the operator's upstream key for the clients of this map only.
CLIENT_MAP = f"""
[policy]
team = "allowed"

[callers.refunds-app]
tokens = ["{CLIENT_TOKEN}"]
dims = {{ business_line = "refunds" }}
allowed = {{ team = ["cs-bot", "from-metadata"] }}
"""
MESSAGES = [
    {"role": "system", "content": "You answer refund questions briefly."},
    {"role": "user", "content": "Where?"},
]


class Records:
    """The proxy's sink seam (wire.shipper.Pipeline in production, tested at the end)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.arrived = threading.Condition()

    def submit(self, record: Mapping[str, Any]) -> None:
        with self.arrived:
            self.records.append(dict(record))
            self.arrived.notify_all()

    def submit_durable(self, records: Iterable[Mapping[str, Any]], timeout: float | None = None) -> int:
        batch = list(records)
        for record in batch:
            self.submit(record)
        return len(batch)

    def wait(self, count: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.records) >= count, timeout), self.records
            return list(self.records)


class Rig:
    def __init__(self, upstream: Upstream, upstream_url: str, records: Records) -> None:
        self.upstream = upstream
        self.upstream_url = upstream_url
        self.records = records
        self.url = ""

    def request(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Content-Type": "application/json", "Authorization": f"Bearer {CLIENT_TOKEN}", **(headers or {})}
        conn.request(method, path, body=data, headers={k: v for k, v in sent.items() if v is not None})
        return conn.getresponse(), conn

    def post(self, path: str, body: Any, **headers: str) -> tuple[int, Mapping[str, str], bytes]:
        response, conn = self.request("POST", path, body, headers)
        try:
            return response.status, response.headers, response.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    fake = Upstream()
    with ServerThread(fake.app()) as server:
        yield fake, server.url


@pytest.fixture(scope="module")
def client_map(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("proxy-map") / "attribution.toml"
    path.write_text(CLIENT_MAP)
    return path


def rig_for(server: tuple[Upstream, str], client_map: Path, records: Any = None, **settings: Any) -> Iterator[Rig]:
    fake, url = server
    records = records or Records()
    rig = Rig(fake, url, records)
    options = {
        "upstream": url,
        "upstream_key": "sk-upstream",
        "hash_key": HASH_KEY,
        "defaults": {"env": "prod"},
        "policy": Policy(client_map),
    }
    with proxy_thread(Settings(**(options | settings)), records) as proxy_url:
        rig.url = proxy_url
        yield rig


@pytest.fixture
def rig(upstream, client_map) -> Iterator[Rig]:
    yield from rig_for(upstream, client_map)


def events(raw: bytes) -> list[Any]:
    out = []
    for block in raw.decode().split("\n\n"):
        data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            out.append(data[0] if data[0] == "[DONE]" else json.loads(data[0]))
    return out


def chat(model: str = "qwen2.5-7b-instruct", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES} | extra


# --- forwarding and records ---------------------------------------------------------------------


def test_it_forwards_a_chat_completion_and_records_its_usage_and_attribution(rig):
    status, headers, body = rig.post(
        "/v1/chat/completions",
        chat(metadata={"feature": "refunds", "team": "from-metadata"}),
        **{"X-Costplatform-Team": "cs-bot", "X-Costplatform-Attempt": "2", "X-Costplatform-Retry-Of": "px-first"},
        Authorization="Bearer client-key",
    )

    record = rig.records.wait()[0]
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "".join(WORDS)
    assert headers["X-Costplatform-Record-Id"] == record["record_id"]
    assert record == {
        "record_id": record["record_id"],
        "ts": record["ts"],
        "model": "qwen2.5-7b-instruct",
        "endpoint": "chat.completions",
        "tokens": {"prompt": PROMPT_TOKENS, "completion": len(WORDS), "prompt_cached": CACHED_TOKENS},
        "outcome": {"status": "ok", "finish_reason": "stop"},
        "dims": {
            "env": "prod",
            "business_line": "refunds",
            "feature": "refunds",
            "team": "cs-bot",
            "caller": "refunds-app",
        },
        "timing": {"e2e": record["timing"]["e2e"]},
        "attempt": 2,
        "retry_of": "px-first",
        "prompt_hash": prompt_hash(MESSAGES, HASH_KEY),
    }
    sent = rig.upstream.seen[-1]["headers"]
    assert not [name for name in sent if name.lower().startswith("x-costplatform-")]
    assert sent["Authorization"] == "Bearer sk-upstream"


def test_it_streams_asking_for_usage_and_hides_the_usage_chunk_from_a_client_that_did_not(rig):
    status, headers, body = rig.post("/v1/chat/completions", chat(stream=True))

    got = events(body)
    record = rig.records.wait()[0]
    assert (status, headers["Content-Type"]) == (200, "text/event-stream")
    assert rig.upstream.seen[-1]["body"]["stream_options"] == {"include_usage": True}
    assert got[-1] == "[DONE]"
    assert all(doc.get("choices") for doc in got[:-1])  # no usage-only chunk
    assert "".join(doc["choices"][0]["delta"].get("content", "") for doc in got[:-1]) == "".join(WORDS)
    assert record["tokens"] == {"prompt": PROMPT_TOKENS, "completion": len(WORDS), "prompt_cached": CACHED_TOKENS}
    assert record["outcome"] == {"status": "ok", "finish_reason": "stop"}
    assert 0 <= record["timing"]["ttft"] <= record["timing"]["e2e"]


def test_it_passes_the_usage_chunk_to_a_client_that_asked_for_it(rig):
    _, _, body = rig.post(
        "/v1/completions", {"model": "m", "prompt": "Hi", "stream": True, "stream_options": {"include_usage": True}}
    )

    got = events(body)
    assert got[-2]["usage"]["completion_tokens"] == len(WORDS)
    assert rig.records.wait()[0]["endpoint"] == "completions"


def test_it_sends_each_event_on_as_it_arrives(rig):
    response, conn = rig.request("POST", "/v1/chat/completions", chat("slow", stream=True))
    started = time.monotonic()
    first = response.readline()
    first_at = time.monotonic() - started
    response.read()
    total = time.monotonic() - started
    conn.close()

    assert first.startswith(b"data: ")
    assert first_at < total / 4  # 40 deltas 50 ms apart: the first is not held back


def test_it_records_a_stream_the_client_abandons_as_aborted_with_the_deltas_seen(rig):
    disconnects = rig.upstream.disconnects
    response, conn = rig.request("POST", "/v1/chat/completions", chat("slow", stream=True))
    for _ in range(6):  # the role chunk and five content deltas, each with its blank line
        response.readline()
        response.readline()
    conn.close()

    record = rig.records.wait()[0]
    assert record["outcome"] == {"status": "aborted", "finish_reason": "abort"}
    assert 5 <= record["tokens"]["completion"] < 15
    deadline = time.monotonic() + 3
    while rig.upstream.disconnects == disconnects and time.monotonic() < deadline:
        time.sleep(0.02)
    assert rig.upstream.disconnects == disconnects + 1  # the proxy hung up on the upstream too


@pytest.mark.parametrize(
    ("model", "status", "outcome"),
    [("fail-400", 400, "error"), ("fail-500", 500, "error"), ("fail-429", 429, "rejected")],
)
def test_it_passes_upstream_errors_on_and_records_them(rig, model, status, outcome):
    got, _, body = rig.post("/v1/chat/completions", chat(model, stream=True))

    record = rig.records.wait()[0]
    assert got == status
    assert json.loads(body)["error"]["code"] == status
    assert record["outcome"] == {"status": outcome}
    assert record["tokens"] == {"prompt": 0, "completion": 0}


def test_it_records_a_stream_broken_by_the_upstream_as_an_error(rig):
    response, conn = rig.request("POST", "/v1/chat/completions", chat("cut", stream=True))
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    conn.close()

    record = rig.records.wait()[0]
    assert record["outcome"] == {"status": "error"}
    assert record["tokens"]["completion"] == 3


@pytest.fixture
def impatient_rig(upstream, client_map) -> Iterator[Rig]:
    yield from rig_for(upstream, client_map, read_timeout=0.3)


def test_it_answers_504_and_records_a_timeout_when_the_upstream_stays_silent(impatient_rig):
    status, _, _ = impatient_rig.post("/v1/chat/completions", chat("mute"))

    assert status == 504
    assert impatient_rig.records.wait()[0]["outcome"] == {"status": "timeout"}


def test_it_cuts_the_stream_and_records_a_timeout_when_the_upstream_stalls_midway(impatient_rig):
    response, conn = impatient_rig.request("POST", "/v1/chat/completions", chat("stall", stream=True))
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    conn.close()

    record = impatient_rig.records.wait()[0]
    assert record["outcome"] == {"status": "timeout"}
    assert record["tokens"]["completion"] == 1


def test_it_answers_502_and_records_an_error_when_the_upstream_is_unreachable(upstream, client_map):
    for rig in rig_for(upstream, client_map, upstream="http://127.0.0.1:9"):
        status, headers, _ = rig.post("/v1/chat/completions", chat())

        record = rig.records.wait()[0]
        assert status == 502
        assert record["record_id"] == headers["X-Costplatform-Record-Id"]
        assert record["outcome"] == {"status": "error"}


def test_it_records_embeddings_and_responses(rig):
    rig.post("/v1/embeddings", {"model": "bge-m3", "input": ["refund policy"]})
    rig.post("/v1/responses", {"model": "qwen", "input": "Where is my refund?"})
    _, _, streamed = rig.post("/v1/responses", {"model": "qwen", "input": "Where is my refund?", "stream": True})

    embedding, response, stream = rig.records.wait(3)
    assert (embedding["endpoint"], embedding["tokens"]) == ("embeddings", {"prompt": 11, "completion": 0})
    for got in (response, stream):
        assert got["endpoint"] == "responses"
        assert got["tokens"] == {"prompt": 50, "completion": 8, "prompt_cached": 32}
        assert got["outcome"] == {"status": "ok", "finish_reason": "length"}
    assert b"response.incomplete" in streamed


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "stream"])
def test_it_records_the_reasoning_tokens_of_the_usage(rig, stream):
    status, _, body = rig.post("/v1/chat/completions", chat(stream=stream, reasoning_tokens=5))

    record = rig.records.wait()[0]
    assert status == 200
    if stream:
        thoughts = [d["choices"][0]["delta"].get("reasoning_content") for d in events(body)[:-1] if d["choices"]]
        assert thoughts.count(" hmm") == 5  # the client sees the reasoning deltas the upstream sent
    assert record["tokens"] == {
        "prompt": PROMPT_TOKENS,
        "completion": len(WORDS) + 5,
        "prompt_cached": CACHED_TOKENS,
        "reasoning": 5,
    }


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "stream"])
@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_it_records_the_prompt_cache_writes_of_the_usage_in_the_prompt(rig, stream, shape):
    # OpenAI's prompt_tokens counts the cache reads and writes; Anthropic's input_tokens counts
    # neither (37 - 16 - 12 = 9 of them): the record's prompt counts both either way.
    rig.post("/v1/chat/completions", chat(stream=stream, cache_write_tokens=12, usage_shape=shape))

    record = rig.records.wait()[0]
    assert record["tokens"] == {
        "prompt": PROMPT_TOKENS,
        "completion": len(WORDS),
        "prompt_cached": CACHED_TOKENS,
        "prompt_cache_write": 12,
    }


def test_it_records_the_reasoning_tokens_of_a_responses_answer(rig):
    rig.post("/v1/responses", {"model": "qwen", "input": "Where is my refund?", "reasoning_tokens": 6})
    rig.post("/v1/responses", {"model": "qwen", "input": "Where?", "reasoning_tokens": 6, "stream": True})

    for record in rig.records.wait(2):
        assert record["tokens"] == {"prompt": 50, "completion": 14, "prompt_cached": 32, "reasoning": 6}


def test_it_passes_other_requests_through_without_a_record(rig):
    response, conn = rig.request("GET", "/v1/models?limit=5", headers={"X-Costplatform-Team": "x"})
    body = json.loads(response.read())
    conn.close()

    time.sleep(0.1)
    assert body["data"][0]["id"] == "qwen2.5-7b-instruct"
    assert rig.records.records == []


# --- who may use it, and who pays -----------------------------------------------------------------


def refused_count(dim: str) -> float:
    return REGISTRY.get_sample_value("costplatform_serving_attribution_refused_total", {"dim": dim}) or 0.0


@pytest.mark.parametrize("authorization", [None, "Bearer sk-guessed", "Basic Y2xpZW50LWtleQ=="])
def test_it_refuses_a_client_without_a_token_of_the_map_when_it_spends_the_upstream_key(rig, authorization):
    seen = len(rig.upstream.seen)

    status, headers, body = rig.post("/v1/chat/completions", chat(), Authorization=authorization)

    assert status == 401
    assert json.loads(body)["error"]["code"] == "invalid_api_key"
    assert headers["WWW-Authenticate"] == "Bearer"
    time.sleep(0.1)
    assert len(rig.upstream.seen) == seen and rig.records.records == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/files"),
        ("POST", "/v1/fine_tuning/jobs"),
        ("DELETE", "/v1/models/qwen2.5-7b-instruct"),
        ("GET", "/v1/models/../files"),
        ("GET", "/v1/chat/completions"),
        ("GET", "/metrics"),
    ],
)
def test_it_refuses_an_unlisted_path_without_forwarding_it(rig, method, path):
    seen = len(rig.upstream.seen)

    response, conn = rig.request(method, path)
    body = json.loads(response.read())
    conn.close()

    assert response.status == 404
    assert body["error"]["type"] == "invalid_request_error" and "Invalid URL" in body["error"]["message"]
    assert len(rig.upstream.seen) == seen


def test_it_bills_a_client_claiming_another_line_to_its_own_and_keeps_the_claim(rig):
    before = refused_count("business_line")

    rig.post("/v1/chat/completions", chat(), **{"X-Costplatform-Business-Line": "payments"})
    rig.post("/v1/chat/completions", chat(metadata={"business_line": "payments"}))

    for record in rig.records.wait(2):
        assert record["dims"]["business_line"] == "refunds"
        assert record["dims"]["refused.business_line"] == "payments"
    assert refused_count("business_line") == before + 2


def test_it_never_lets_a_client_make_a_reconciliation_record(rig):
    rig.post("/v1/chat/completions", chat(), **{"X-Costplatform-Costplatform.kind": "reconciliation"})
    rig.post("/v1/chat/completions", chat(metadata={"costplatform.kind": "reconciliation", "source": "vllm-1"}))

    for record in rig.records.wait(2):
        assert "costplatform.kind" not in record["dims"] and "source" not in record["dims"]
        assert record["dims"]["refused.costplatform.kind"] == "reconciliation"


def raw_post(rig: Rig, path: str, body: bytes, headers: list[tuple[str, str]]) -> tuple[int, dict[str, Any]]:
    """A POST with the headers as given, repeated ones included."""
    parts = urlsplit(rig.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("POST", path)
        for name, value in [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers]:
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_it_refuses_two_authorization_headers_without_forwarding(rig):
    """Issue 31, finding 2: exactly one Authorization decides the caller."""
    seen = len(rig.upstream.seen)
    two = [("Authorization", f"Bearer {CLIENT_TOKEN}"), ("Authorization", "Bearer anything")]

    status, body = raw_post(rig, "/v1/chat/completions", json.dumps(chat()).encode(), two)

    assert (status, body["error"]["code"]) == (400, "two_authorizations")
    time.sleep(0.1)
    assert len(rig.upstream.seen) == seen and rig.records.records == []


@pytest.mark.parametrize("body", [b"[1, 2]", b"{oops", b'"text"'])
def test_it_refuses_a_metered_body_that_is_no_json_object_without_forwarding(rig, body):
    seen = len(rig.upstream.seen)

    status, answer = raw_post(rig, "/v1/chat/completions", body, [("Authorization", f"Bearer {CLIENT_TOKEN}")])

    assert (status, answer["error"]["code"]) == (400, "body_not_json")
    assert len(rig.upstream.seen) == seen


def test_it_refuses_a_body_over_the_edges_limit_with_413_without_forwarding(rig):
    """Issue 31, finding 3: an oversized body is refused, never passed on ungated."""
    seen = len(rig.upstream.seen)
    padded = json.dumps(chat(user="x" * (edge.MAX_BODY + 1024))).encode()

    status, answer = raw_post(rig, "/v1/chat/completions", padded, [("Authorization", f"Bearer {CLIENT_TOKEN}")])

    assert (status, answer["error"]["code"]) == (413, "body_too_large")
    assert len(rig.upstream.seen) == seen


@pytest.mark.parametrize("target", ["http://evil.example/v1/chat/completions", "//evil.example/v1/chat/completions"])
def test_it_refuses_an_absolute_form_request_target_without_forwarding(rig, target):
    """Issue 31, a Low: `POST http://evil.example/...` was a 500."""
    seen = len(rig.upstream.seen)
    parts = urlsplit(rig.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    body = json.dumps(chat()).encode()
    conn.putrequest("POST", target, skip_host=True)
    for name, value in [("Host", "evil.example"), ("Content-Type", "application/json"),
                        ("Content-Length", str(len(body))), ("Authorization", f"Bearer {CLIENT_TOKEN}")]:  # fmt: skip
        conn.putheader(name, value)
    conn.endheaders(body)
    response = conn.getresponse()
    status = response.status
    conn.close()

    assert status in (400, 404)
    assert len(rig.upstream.seen) == seen


def test_it_reads_the_usage_of_an_answer_larger_than_it_keeps(rig):
    # About 21 MB of text: the answer is scanned as it passes, never held whole.
    status, _, body = rig.post("/v1/chat/completions", chat(reply_words=3_000_000, reply_tokens=3_000_000))

    record = rig.records.wait()[0]
    assert status == 200 and len(body) > 20_000_000
    assert record["tokens"] == {"prompt": PROMPT_TOKENS, "completion": 3_000_000, "prompt_cached": CACHED_TOKENS}
    assert record["outcome"] == {"status": "ok", "finish_reason": "stop"}


class StalledRecords(Records):
    """A sink whose first record, on the builder thread, waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def submit(self, record: Mapping[str, Any]) -> None:
        if threading.current_thread().name == "proxy-records" and not self.release.is_set():
            self.release.wait(10)
        super().submit(record)


def test_it_builds_records_beyond_its_bounded_queue_at_once_rather_than_hold_or_lose_them(upstream, client_map):
    sink = StalledRecords()
    before = INLINE_RECORDS._value.get()
    for rig in rig_for(upstream, client_map, records=sink, max_queued_records=1):
        for _ in range(3):  # the builder holds the first, the queue the second: the third is built at once
            assert rig.post("/v1/chat/completions", chat())[0] == 200
        assert len(sink.wait(1)) == 1 and INLINE_RECORDS._value.get() == before + 1
        sink.release.set()
        assert len(sink.wait(3)) == 3


# --- with a tokenizer ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A real Hugging Face tokenizer, built offline: one token per word or run of punctuation."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    wrapped = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


@pytest.fixture
def counting_rig(upstream, client_map, tokenizer) -> Iterator[Rig]:
    yield from rig_for(upstream, client_map, tokenizer=tokenizer)


def test_it_counts_system_tool_and_structural_tokens_with_a_tokenizer(counting_rig):
    messages = [*MESSAGES, {"role": "tool", "content": "order 42 refunded"}]
    reply = '{"order": 42, "state": "refunded"}'
    counting_rig.post(
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": messages,
            "reply": reply,
            "reply_tokens": 11,
            "response_format": {"type": "json_object"},
        },
    )

    tokens = counting_rig.records.wait()[0]["tokens"]
    # "<" "system" ">" + 5 words + "." = 9; "<" "tool" ">" + "order 42 refunded" = 6
    assert (tokens["system"], tokens["tool"]) == (9, 6)
    assert tokens["structural"] == 9  # { " order " : , " state " and } ; the values 42 and refunded are not


def test_it_counts_an_abandoned_stream_with_the_tokenizer(counting_rig):
    response, conn = counting_rig.request("POST", "/v1/chat/completions", chat("slow", stream=True))
    for _ in range(5):
        response.readline()
        response.readline()
    conn.close()

    record = counting_rig.records.wait()[0]
    assert record["outcome"]["status"] == "aborted"
    # The chat template rendered and tokenized here: 9 (system) + 5 (<user> Where?) + 3 (<assistant>)
    assert record["tokens"]["prompt"] == 17
    assert 4 <= record["tokens"]["completion"] < 15  # words of the streamed text ("." counts too)


# --- into the platform --------------------------------------------------------------------------


@pytest.mark.usefixtures("truncate_records")
def test_its_records_reach_the_platform(live_server, upstream, tmp_path):
    from apps.ingest.models import Record
    from tests.factories import collector_key

    key = collector_key()
    fake, url = upstream
    with Pipeline(tmp_path / "spool", url=live_server.url, key=key.secret, registry=CollectorRegistry()) as pipeline:
        with proxy_thread(
            Settings(upstream=url, hash_key=HASH_KEY, defaults={"business_line": "refunds"}), pipeline
        ) as proxy:
            rig = Rig(fake, url, Records())
            rig.url = proxy
            _, headers, _ = rig.post("/v1/chat/completions", chat(stream=True))
            _, thinking, _ = rig.post("/v1/chat/completions", chat(reasoning_tokens=30))
        assert pipeline.flush(10)

    stored = Record.objects.select_related("dims").get(source=key.key, record_id=headers["X-Costplatform-Record-Id"])
    assert (stored.prompt, stored.prompt_cached, stored.completion) == (PROMPT_TOKENS, CACHED_TOKENS, len(WORDS))
    assert stored.reasoning == 0
    reasoned = Record.objects.get(source=key.key, record_id=thinking["X-Costplatform-Record-Id"])
    assert (reasoned.completion, reasoned.reasoning) == (len(WORDS) + 30, 30)
    assert stored.dims.dims == {"business_line": "refunds"}
    assert bytes(stored.prompt_hash).hex() == prompt_hash(MESSAGES, HASH_KEY)
