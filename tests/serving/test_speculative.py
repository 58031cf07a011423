"""Speculative decoding: each request's drafts proposed and accepted, as the engine counted them for
that request, and the drafts of requests without such figures reconciled from vLLM's counters, once."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from collectors.vllm_metrics import parse_metrics
from tests.processes import PlatformServer, VllmServer
from tests.serving.test_reconciliation import MODEL, Watch

pytestmark = pytest.mark.slow
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
# Repetitive prompts: n-gram drafting proposes tokens from them.
PROMPTS = ["a b c a b c a b c a b c a b c", "one two one two one two one two", "x y z x y z x y z x y z x y z"]


@pytest.fixture(scope="module")
def spec_server(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, platform: PlatformServer, attribution_map: Path
) -> Iterator[VllmServer]:
    extra = ["--speculative-config", json.dumps(NGRAM), "--max-model-len", "1024"]
    extra += ["--attribution-map", str(attribution_map)]
    server = VllmServer(tmp_path_factory.mktemp("vllm-spec"), tiny_model, platform, extra=extra)
    yield server.start()
    server.stop()


def spec_counters(server: VllmServer) -> tuple[int, int]:
    counts = parse_metrics(server.metrics())[MODEL].vllm
    return counts.draft, counts.draft_accepted


def complete(server: VllmServer, prompt: str, run: str) -> dict[str, Any]:
    # Greedy: sampled, the random model's answer may never repeat what n-gram drafting proposes
    # from, and a record with no drafts proves nothing.
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 40, "ignore_eos": True, "temperature": 0}
    headers = {"X-Costplatform-Run": run, "X-Costplatform-Feature": f"spec-{run}"}
    response = httpx.post(f"{server.url}/v1/completions", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def test_each_record_carries_the_drafts_the_engine_counted_for_its_request(
    spec_server: VllmServer, platform: PlatformServer
) -> None:
    # Three requests at once, so that vLLM's counters cannot tell them apart: only the engine's
    # per-request figures (its answer's metrics.speculative_decoding) can.
    run = uuid.uuid4().hex
    drafts_before, accepted_before = spec_counters(spec_server)
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        answers = list(pool.map(lambda prompt: complete(spec_server, prompt, run), PROMPTS))
    drafts_after, accepted_after = spec_counters(spec_server)

    records = {r["record_id"]: r for r in platform.wait_records(len(PROMPTS), **{"dims.run": run})}
    engine = {a["id"]: a["metrics"]["speculative_decoding"] for a in answers}
    carried = {rid: (r["tokens"].get("draft", 0), r["tokens"].get("draft_accepted", 0)) for rid, r in records.items()}
    assert carried == {rid: (m["num_draft_tokens"], m["num_accepted_draft_tokens"]) for rid, m in engine.items()}
    assert sum(d for d, _ in carried.values()) == drafts_after - drafts_before > 0
    assert sum(a for _, a in carried.values()) == accepted_after - accepted_before
    rejected = sum(d - a for d, a in carried.values())
    assert rejected > 0

    # shadow.spec_rejected is exactly the records' drafts less their accepted ones.
    now = datetime.now(UTC)
    window = {"from": (now - timedelta(hours=2)).isoformat(), "to": (now + timedelta(hours=2)).isoformat()}
    rows = platform.get("/api/v1/usage/classes", **window, granularity="hour", group_by="reason",
                        **{"dims.feature": f"spec-{run}"})["rows"]  # fmt: skip
    assert sum(r["tokens"] for r in rows if r["reason"] == "shadow.spec_rejected") == rejected


def abandon_completion(server: VllmServer, prompt: str, run: str) -> None:
    """A long streamed completion the client hangs up on after a few chunks."""
    # Greedy: the random model falls into a loop, which n-gram drafting then proposes from.
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 900, "ignore_eos": True, "stream": True, "temperature": 0}
    # A small receive buffer: the server cannot write the whole answer before we hang up.
    transport = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    with (
        httpx.Client(transport=transport, timeout=60) as client,
        client.stream("POST", f"{server.url}/v1/completions", json=body, headers={"X-Costplatform-Run": run}) as r,
    ):
        assert r.status_code == 200
        chunks = 0
        for line in r.iter_lines():
            chunks += line.startswith("data:")
            if chunks >= 5:
                break


def test_drafts_of_aborted_requests_are_reconciled_and_those_in_records_are_not_counted_again(
    spec_server: VllmServer, platform: PlatformServer, tmp_path: Path
) -> None:
    watch = Watch(spec_server, platform, tmp_path, source=f"spec-{uuid.uuid4().hex[:8]}")
    watch.settle()  # the baseline
    before = watch.counters()

    run = uuid.uuid4().hex
    complete(spec_server, PROMPTS[0], run)
    emitted: list[dict[str, Any]] = []
    for attempt in range(1, 4):
        abandon_completion(spec_server, PROMPTS[1], run)
        emitted += watch.settle()
        records = platform.wait_records(1 + attempt, **{"dims.run": run})
        if any(r["outcome"]["status"] == "aborted" for r in records):
            break
        # The whole answer fitted in the socket's buffers: answered in full and recorded. Again.
    grew = watch.counters().minus(before)
    watch.close()

    # vLLM makes no per-request figures for a request it aborts: its record has its tokens but no
    # drafts, and its drafts, in the counters alone, come as a reconciliation record; the drafts of
    # the records are not claimed again.
    aborted = [r for r in records if r["outcome"]["status"] == "aborted"]
    assert aborted and all(r["tokens"].get("draft", 0) == 0 and r["tokens"]["completion"] > 0 for r in aborted)
    in_records = [sum(r["tokens"].get(kind, 0) for r in records) for kind in ("draft", "draft_accepted")]
    reconciled = [sum(r["tokens"].get(kind, 0) for r in emitted) for kind in ("draft", "draft_accepted")]
    assert in_records[0] > 0 and reconciled[0] > 0, (grew, in_records, reconciled, aborted)
    assert reconciled == [grew.draft - in_records[0], grew.draft_accepted - in_records[1]]
    stored = platform.wait_records(len(emitted), **{"dims.source": watch.reconciler.source})
    assert sum(r["tokens"].get("draft", 0) for r in stored) == reconciled[0]
