"""Anthropic's Messages API through the proxy, in front of a real loopback upstream that answers
as Anthropic does (tests/collectors/anthropic_upstream.py): what the client and the upstream
see, and the record of each request, its prompt the input plus the cache reads and writes."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from collectors.httpserve import ServerThread
from tests.collectors.anthropic_upstream import CACHE_READ, FINAL_INPUT, INPUT, WORDS, MessagesUpstream
from tests.collectors.test_proxy import CLIENT_MAP, CLIENT_TOKEN, HASH_KEY, Rig, events, rig_for
from tests.wire.otlp_receiver import Receiver, attrs, receiver_fixture, sums
from wire import genai_metrics as gm
from wire.budgets import BudgetGate
from wire.record import prompt_hash
from wire.reservations import Reservations, largest_use
from wire.shipper import Pipeline

__all__ = ["receiver_fixture"]

SYSTEM = "You answer refund questions briefly."
MESSAGES = [{"role": "user", "content": "Where is my refund?"}]
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def message(model: str = "claude-haiku", **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "system": SYSTEM, "messages": MESSAGES} | extra


def post(rig: Rig, body: dict[str, Any], **headers: str | None) -> tuple[int, Any, bytes]:
    """A request as Anthropic's clients send it: the key in x-api-key, no Authorization."""
    sent = {"Authorization": None, "x-api-key": CLIENT_TOKEN, **ANTHROPIC} | headers
    return rig.post("/v1/messages", body, **sent)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[MessagesUpstream, str]]:
    fake = MessagesUpstream()
    with ServerThread(fake.app()) as server:
        yield fake, server.url


@pytest.fixture(scope="module")
def client_map(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("proxy-messages-map") / "attribution.toml"
    path.write_text(CLIENT_MAP)
    return path


@pytest.fixture
def rig(upstream, client_map) -> Iterator[Rig]:
    yield from rig_for(upstream, client_map)  # type: ignore[arg-type]


@pytest.mark.parametrize("written", [0, 900])
def test_it_forwards_a_message_and_records_its_prompt_as_input_plus_cache_reads_and_writes(rig, written):
    status, headers, raw = post(rig, message(cache_write_tokens=written, metadata={"team": "from-metadata"}))

    record = rig.records.wait()[0]
    assert status == 200
    assert json.loads(raw)["content"][0]["text"] == "".join(WORDS)
    assert headers["X-Costplatform-Record-Id"] == record["record_id"]
    tokens = {"prompt": INPUT + CACHE_READ + written, "completion": len(WORDS), "prompt_cached": CACHE_READ}
    assert record["tokens"] == tokens | ({"prompt_cache_write": written} if written else {})
    assert (record["endpoint"], record["model"]) == ("messages", "claude-haiku")
    assert record["outcome"] == {"status": "ok", "finish_reason": "stop"}
    dims = {"env": "prod", "business_line": "refunds", "team": "from-metadata", "caller": "refunds-app"}
    assert record["dims"] == dims
    system_first = [{"role": "system", "content": SYSTEM}, *MESSAGES]
    assert record["prompt_hash"] == prompt_hash(system_first, HASH_KEY)  # the system prompt hashed too
    sent = rig.upstream.seen[-1]
    assert sent["headers"]["x-api-key"] == "sk-upstream" and "Authorization" not in sent["headers"]
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert sent["body"]["system"] == SYSTEM and sent["path"] == "/v1/messages"


@pytest.mark.parametrize(
    ("final_usage", "uncached"),
    [("output", INPUT), ("full", FINAL_INPUT)],  # message_delta's own input count wins where it sends one
)
def test_it_streams_a_message_and_records_the_final_counts_over_the_first(rig, final_usage, uncached):
    status, headers, raw = post(rig, message(stream=True, cache_write_tokens=300, final_usage=final_usage))

    got = events(raw)
    record = rig.records.wait()[0]
    assert (status, headers["Content-Type"]) == (200, "text/event-stream")
    kinds = [doc["type"] for doc in got]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"] and "ping" in kinds
    assert "".join(doc["delta"]["text"] for doc in got if doc["type"] == "content_block_delta") == "".join(WORDS)
    assert record["tokens"] == {
        "prompt": uncached + CACHE_READ + 300,
        "completion": len(WORDS),  # message_delta's, not message_start's 1
        "prompt_cached": CACHE_READ,
        "prompt_cache_write": 300,
    }
    assert (record["endpoint"], record["outcome"]) == ("messages", {"status": "ok", "finish_reason": "stop"})
    assert 0 <= record["timing"]["ttft"] <= record["timing"]["e2e"]


@pytest.mark.parametrize("stream", [False, True])
def test_it_records_a_message_stopped_by_max_tokens_as_length(rig, stream):
    post(rig, message("max-out", stream=stream))

    assert rig.records.wait()[0]["outcome"] == {"status": "ok", "finish_reason": "length"}


def test_it_records_a_message_stream_the_client_abandons_with_its_prompt_and_the_deltas_seen(rig):
    disconnects = rig.upstream.disconnects
    headers = {"Authorization": None, "x-api-key": CLIENT_TOKEN, **ANTHROPIC}
    response, conn = rig.request("POST", "/v1/messages", message("slow", stream=True, cache_write_tokens=50), headers)
    for _ in range(8):  # message_start, content_block_start, ping and five deltas: event, data, blank line
        for _ in range(3):
            response.readline()
    conn.close()

    record = rig.records.wait()[0]
    assert record["outcome"] == {"status": "aborted", "finish_reason": "abort"}
    assert record["tokens"]["prompt"] == INPUT + CACHE_READ + 50  # message_start's counts stand
    assert (record["tokens"]["prompt_cached"], record["tokens"]["prompt_cache_write"]) == (CACHE_READ, 50)
    assert 5 <= record["tokens"]["completion"] < 6 * len(WORDS)  # the deltas seen, not message_start's 1
    deadline = time.monotonic() + 3
    while rig.upstream.disconnects == disconnects and time.monotonic() < deadline:
        time.sleep(0.02)
    assert rig.upstream.disconnects == disconnects + 1  # the proxy hung up on the upstream too


def test_it_passes_an_upstream_error_on_and_records_it(rig):
    status, _, raw = post(rig, message("fail-529"))

    assert (status, json.loads(raw)["error"]["type"]) == (529, "api_error")
    assert rig.records.wait()[0]["outcome"]["status"] == "error"


@pytest.mark.parametrize(
    "credentials",
    [{"x-api-key": None}, {"x-api-key": "not-in-the-map"}],
)
def test_it_refuses_a_client_without_a_key_of_the_map_when_it_spends_the_upstream_key(rig, credentials):
    calls = rig.upstream.counter

    status, _, raw = post(rig, message(), **credentials)

    assert status == 401 and "x-api-key" in json.loads(raw)["error"]["message"]
    assert rig.upstream.counter == calls


@pytest.mark.parametrize(
    ("credentials", "code"),
    [
        ({"Authorization": "Bearer someone-else"}, "two_credentials"),
        ({"Authorization": "Bearer not-in-the-map", "x-api-key": "not-in-the-map"}, None),
    ],
)
def test_it_takes_one_credential_only_refusing_two_that_differ(rig, credentials, code):
    calls = rig.upstream.counter

    status, _, raw = post(rig, message(), **credentials)

    if code is None:  # the same token twice is one credential: the map knows it not, so 401
        assert status == 401
    else:
        assert (status, json.loads(raw)["error"]["code"]) == (400, code)
    assert rig.upstream.counter == calls


def test_a_bearer_token_names_the_caller_of_a_message_too(rig):
    status, _, _ = post(rig, message(), **{"x-api-key": None, "Authorization": f"Bearer {CLIENT_TOKEN}"})

    assert status == 200 and rig.records.wait()[0]["dims"]["caller"] == "refunds-app"
    assert rig.upstream.seen[-1]["headers"]["x-api-key"] == "sk-upstream"


def test_without_the_upstream_key_the_clients_own_key_goes_upstream_and_names_the_caller(upstream, client_map):
    for rig in rig_for(upstream, client_map, upstream_key=None):  # type: ignore[arg-type]
        status, _, _ = post(rig, message())
        record = rig.records.wait()[0]

    assert status == 200 and record["dims"]["caller"] == "refunds-app"
    assert rig.upstream.seen[-1]["headers"]["x-api-key"] == CLIENT_TOKEN


def test_with_reservations_a_message_is_served_only_while_its_largest_use_fits(upstream, client_map):
    """A message reserves its prompt (its system prompt and messages, bounded by their bytes) plus
    its max_tokens and is settled to the usage the upstream reported, cache reads and writes
    included; the next that does not fit is refused with the 429 (wire/reservations.py, on the
    tests' Redis)."""
    client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    store = Reservations(client, ttl=60, hold=60, prefix="{test-proxy-messages-" + uuid.uuid4().hex + "}")
    body = message(cache_write_tokens=100)
    need = largest_use("messages", body, prompt_tokens=lambda b: 0, default_max=4096).tokens
    assert need > len(SYSTEM) + 64  # the system prompt's bytes and the max_tokens are reserved
    used = INPUT + CACHE_READ + 100 + len(WORDS)
    limit = 10**6
    budget = {
        "id": 1, "business_line": "refunds", "team": "", "caller": "", "hard": True, "holds": False, "currency": "",
        "amount": None, "used_amount": "0.00", "tokens": limit, "used_tokens": limit - (need + used - 1),
        "resets_at": "2099-01-01T00:00:00+00:00",
    }  # fmt: skip
    gate = BudgetGate(lambda: {"budgets": [budget]}, interval=60, reservations=store)
    assert gate.poll()
    try:
        for rig in rig_for(upstream, client_map, budgets=gate):  # type: ignore[arg-type]
            calls = rig.upstream.counter
            first, _, _ = post(rig, body)
            deadline = time.monotonic() + 10
            while store.held(1) != used and time.monotonic() < deadline:
                time.sleep(0.05)
            held = store.held(1)
            second, _, raw = post(rig, body)
    finally:
        client.delete(*store.keys([1]))

    assert first == 200 and held == used  # settled to the record: input + cache reads + writes + output
    assert second == 429 and json.loads(raw)["error"]["reservation"]["tokens"] == need
    assert rig.upstream.counter == calls + 1  # the refused one never went upstream


def test_the_genai_metrics_count_a_message_as_a_chat_of_its_whole_prompt(upstream, client_map, receiver: Receiver):
    metrics = gm.TokenMetrics(receiver.url, provider="anthropic", service=gm.PROXY_SERVICE)
    try:
        for rig in rig_for(upstream, client_map, token_metrics=metrics):  # type: ignore[arg-type]
            post(rig, message(cache_write_tokens=40))
            post(rig, message(stream=True))
            built = rig.records.wait(2)
        assert metrics.flush()
    finally:
        metrics.shutdown()

    got = receiver.latest()
    assert (
        sum(sums(got[gm.USAGE_INPUT]).values())
        == 2 * (INPUT + CACHE_READ) + 40
        == sum(r["tokens"]["prompt"] for r in built)
    )
    assert sum(sums(got[gm.USAGE_CACHE_WRITE]).values()) == 40
    assert sum(sums(got[gm.USAGE_OUTPUT]).values()) == 2 * len(WORDS)
    operations = [attrs(p.attributes) for p in got[gm.OPERATION_INPUT].histogram.data_points]
    assert {(o["gen_ai.operation.name"], o["gen_ai.provider.name"]) for o in operations} == {("chat", "anthropic")}


@pytest.mark.usefixtures("truncate_records")
def test_its_messages_are_stored_by_the_platform_with_their_caller(live_server, upstream, client_map, tmp_path):
    from apps.ingest.models import Endpoint, Record
    from tests.factories import collector_key

    key = collector_key()
    with Pipeline(tmp_path / "spool", url=live_server.url, key=key.secret, registry=CollectorRegistry()) as pipeline:
        for rig in rig_for(upstream, client_map, records=pipeline):  # type: ignore[arg-type]
            _, plain, _ = post(rig, message(cache_write_tokens=1200))
            _, streamed, _ = post(rig, message(stream=True, cache_write_tokens=1200, final_usage="full"))
        assert pipeline.flush(10)

    stored = Record.objects.select_related("dims").filter(source=key.key)
    by_id = {r.record_id: r for r in stored}
    for headers, uncached in ((plain, INPUT), (streamed, FINAL_INPUT)):
        record = by_id[headers["X-Costplatform-Record-Id"]]
        assert record.endpoint == Endpoint.MESSAGES
        assert (record.prompt, record.prompt_cached, record.prompt_cache_write, record.completion) == (
            uncached + CACHE_READ + 1200,
            CACHE_READ,
            1200,
            len(WORDS),
        )
        assert record.dims.dims["caller"] == "refunds-app"  # named by its x-api-key
