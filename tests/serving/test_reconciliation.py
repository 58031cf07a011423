"""vLLM's /metrics against the records: the gap the per-request stats leave (client aborts)
is found and booked as unattributed tokens, and the middleware leaves no gap."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from collectors.vllm_metrics import Counts, Reconciler, parse_metrics
from tests.processes import PlatformServer, VllmServer
from tests.serving.test_vllm_instrumentation import abandon_stream, chat
from wire.shipper import Pipeline

pytestmark = pytest.mark.slow
MODEL = "tiny-llama"


@pytest.fixture(scope="module")
def plain_server(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, platform: PlatformServer
) -> Iterator[VllmServer]:
    """The stat logger alone: no middleware, so no engine hooks either."""
    server = VllmServer(tmp_path_factory.mktemp("vllm-plain"), tiny_model, platform, extra=["--no-middleware"])
    yield server.start()
    server.stop()


class Watch:
    """A reconciler reading one server's page, shipping to the platform."""

    def __init__(self, server: VllmServer, platform: PlatformServer, workdir: Path, source: str) -> None:
        self.server = server
        self.pipeline = Pipeline(workdir / "spool", url=platform.url, key=platform.key, registry=CollectorRegistry())
        self.pipeline.start()
        self.reconciler = Reconciler(
            source=source, sink=self.pipeline, state_path=workdir / "state.json", settle=2, registry=CollectorRegistry()
        )

    def counters(self) -> Counts:
        return parse_metrics(self.server.metrics())[MODEL].vllm

    def accounted(self) -> Counts:
        """The tokens the server has put into records."""
        return parse_metrics(self.server.metrics())[MODEL].accounted

    def settle(self, scrapes: int = 60) -> list[dict[str, Any]]:
        """Scrape until the counters have settled; the reconciliation records made on the way."""
        emitted: list[dict[str, Any]] = []
        for _ in range(scrapes):
            emitted += self.reconciler.step(self.server.metrics())
            if self.reconciler.settled() and (emitted or self.reconciler.state.models[MODEL].steady > 2):
                return emitted
            time.sleep(0.5)
        raise AssertionError("the counters never settled")

    def close(self) -> None:
        assert self.pipeline.flush(60)
        self.pipeline.close()


def test_it_books_the_tokens_of_aborted_requests_when_only_the_stat_logger_records(
    plain_server: VllmServer, platform: PlatformServer, tmp_path: Path
) -> None:
    watch = Watch(plain_server, platform, tmp_path, source=f"plain-{uuid.uuid4().hex[:8]}")
    watch.settle()  # the baseline
    before, accounted = watch.counters(), watch.accounted()

    request_id = uuid.uuid4().hex
    answered = chat(
        plain_server, {"messages": [{"role": "user", "content": "where is my refund"}]}, **{"X-Request-Id": request_id}
    )
    usage = answered.json()["usage"]
    for _ in range(3):
        abandon_stream(plain_server, {})
        emitted = watch.settle()
        if emitted:
            break
        # On a loaded machine the server may write the whole answer into the socket's buffers
        # before it sees the client go: the request was then answered in full and recorded, not
        # aborted, and there is no gap: every token vLLM counted was put into a record. Again.
        grew, recorded = watch.counters().minus(before), watch.accounted().minus(accounted)
        assert (recorded.prompt, recorded.generation) == (grew.prompt, grew.generation), (
            f"no gap emitted, yet vLLM counted {grew} and the server accounted {recorded} since the baseline"
        )
        before, accounted = watch.counters(), watch.accounted()
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
    after = watch.counters()
    watch.close()

    aborted_generation = after.generation - before.generation - usage["completion_tokens"]
    aborted_prompt = after.prompt - before.prompt - usage["prompt_tokens"]
    assert aborted_generation > 0 and aborted_prompt > 0
    (gap,) = emitted
    assert gap["tokens"]["completion"] == aborted_generation
    assert gap["tokens"]["prompt"] == aborted_prompt
    assert gap["dims"]["costplatform.kind"] == "reconciliation"
    stored = platform.wait_records(1, **{"dims.source": watch.reconciler.source})
    assert stored[0]["tokens"]["completion"] == aborted_generation
    # The answered request was recorded by the stat logger alone (the server's default dims only).
    (record,) = wait_for_record(platform, f"chatcmpl-{request_id}", **{"dims.env": "test"})
    assert record["dims"] == {"env": "test"}
    assert record["tokens"]["completion"] == answered.json()["usage"]["completion_tokens"]


def wait_for_record(platform: PlatformServer, record_id: str, **filters: str) -> list[dict[str, Any]]:
    for _ in range(60):
        found = [r for r in platform.records(**filters) if r["record_id"] == record_id]
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{record_id} never arrived")


def test_it_leaves_no_gap_when_the_middleware_records_the_aborted_requests(
    vllm_server: VllmServer, platform: PlatformServer, tmp_path: Path
) -> None:
    watch = Watch(vllm_server, platform, tmp_path, source=f"full-{uuid.uuid4().hex[:8]}")
    watch.settle()
    before = watch.counters()

    abandon_stream(vllm_server, {})
    chat(vllm_server, {"messages": [{"role": "user", "content": "and now?"}]})
    emitted = watch.settle()
    watch.close()

    assert watch.counters().generation > before.generation
    assert emitted == []
