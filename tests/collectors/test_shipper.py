"""The pipeline against a real costplatform (live_server on PostgreSQL) and loopback receivers."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apps.ingest.models import Record, Rejection
from collectors import shipper as shipper_command
from tests.factories import DELETE, collector_key, record
from wire import shipper
from wire.send import Sender, SendError, send_lines
from wire.shipper import Pipeline, backoff_delay, retry_after_seconds
from wire.spool import Spool

FAST = {"flush_interval": 0.05, "backoff_base": 0.05, "backoff_cap": 0.2, "timeout": 5.0}


def metric(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name)
    assert value is not None, name
    return value


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stored(key: Any) -> int:
    return Record.objects.filter(source=key.key).count()


@contextmanager
def http_server(handle: Callable[[BaseHTTPRequestHandler, bytes], None], port: int = 0) -> Iterator[str]:
    """A loopback HTTP/1.1 server calling handle(request, body) for each POST; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            handle(self, self.rfile.read(int(self.headers["Content-Length"])))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def reply(request: BaseHTTPRequestHandler, status: int, body: dict, **headers: str) -> None:
    data = json.dumps(body).encode()
    request.send_response(status)
    for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
        request.send_header(name, value)
    request.end_headers()
    request.wfile.write(data)


class Receiver:
    """Answers the scripted statuses in turn, then 200 like the ingest API; keeps every body."""

    def __init__(self, *script: tuple[int, dict[str, str]]) -> None:
        self.script = list(script)
        self.bodies: list[bytes] = []
        self.times: list[float] = []

    def __call__(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        self.bodies.append(body)
        self.times.append(time.monotonic())
        if self.script:
            status, headers = self.script.pop(0)
            reply(request, status, {"detail": "scripted"}, **headers)
        else:
            reply(request, 200, {"accepted": len(body.splitlines()), "duplicates": 0, "rejected": []})

    def record_ids(self) -> list[str]:
        return [json.loads(line)["record_id"] for body in self.bodies for line in body.splitlines()]


def forward_to(target: str, *, lose_answers: int = 0) -> Callable[[BaseHTTPRequestHandler, bytes], None]:
    """A reverse proxy to the platform; the first `lose_answers` answers are replaced by a 502
    after the platform has stored the batch (a lost response)."""
    lost = [lose_answers]

    def handle(request: BaseHTTPRequestHandler, body: bytes) -> None:
        conn = http.client.HTTPConnection(target.removeprefix("http://"), timeout=30)
        headers = {k: v for k, v in request.headers.items() if k.lower() in {"authorization", "content-type"}}
        conn.request("POST", request.path, body=body, headers=headers)
        response = conn.getresponse()
        answer = json.loads(response.read() or b"{}")
        conn.close()
        if lost[0] > 0:
            lost[0] -= 1
            reply(request, 502, {"detail": "answer lost"})
        else:
            reply(request, response.status, answer)

    return handle


# --- pure functions -----------------------------------------------------------------------


def test_backoff_grows_to_its_cap_with_full_jitter():
    assert [backoff_delay(n, base=0.5, cap=8, rand=lambda: 1.0) for n in range(6)] == [0.5, 1, 2, 4, 8, 8]
    assert backoff_delay(3, base=0.5, cap=8, rand=lambda: 0.0) == 0
    delays = [backoff_delay(4, base=0.5, cap=60) for _ in range(500)]
    assert all(0 <= d < 8 for d in delays)
    assert min(delays) < 2 and max(delays) > 6  # spread over the whole range, not bunched
    assert backoff_delay(10_000, base=0.5, cap=60, rand=lambda: 1.0) == 60


def test_it_reads_retry_after_as_seconds_or_a_date():
    now = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    assert retry_after_seconds("7") == 7
    assert retry_after_seconds("Sat, 01 Mar 2025 10:00:30 GMT", now=now) == 30
    assert retry_after_seconds("Sat, 01 Mar 2025 09:00:00 GMT", now=now) == 0
    assert retry_after_seconds("100000") == shipper.RETRY_AFTER_CAP
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


# --- loopback receivers -------------------------------------------------------------------


def test_it_retries_a_batch_after_server_errors_and_counts_them(tmp_path):
    registry = CollectorRegistry()
    receiver = Receiver((500, {}), (503, {}))
    with http_server(receiver) as url, Pipeline(tmp_path, url=url, key="k", registry=registry, **FAST) as pipeline:
        for n in range(5):
            pipeline.submit({"record_id": f"r{n}", "ts": "2025-03-01T10:00:00Z"})
        assert pipeline.flush(timeout=10)

    assert len(receiver.bodies) == 3 and len(set(receiver.bodies)) == 1
    assert receiver.record_ids() == [f"r{n}" for n in range(5)] * 3
    assert metric(registry, "costplatform_shipper_failed_requests_total") == 2
    assert metric(registry, "costplatform_shipper_shipped_records_total") == 5
    assert metric(registry, "costplatform_shipper_queued_records") == 0


def test_it_tells_its_observer_of_each_batch_the_platform_stored_once(tmp_path):
    """The edge's budget gate learns which records are stored (BudgetGate.acked), not of a failed try."""
    told: list[str] = []
    receiver = Receiver((500, {}))
    with http_server(receiver) as url, Pipeline(tmp_path, url=url, key="k", registry=CollectorRegistry(), **FAST) as p:
        p.on_acked = lambda lines: told.extend(json.loads(line)["record_id"] for line in lines)
        for n in range(3):
            p.submit({"record_id": f"r{n}"})
        assert p.flush(timeout=10)

    assert len(receiver.bodies) == 2 and told == ["r0", "r1", "r2"]


def test_it_waits_as_long_as_retry_after_says(tmp_path):
    receiver = Receiver((429, {"Retry-After": "1"}))
    with http_server(receiver) as url, Pipeline(tmp_path, url=url, key="k", registry=CollectorRegistry(), **FAST) as p:
        p.submit({"record_id": "r1"})
        assert p.flush(timeout=10)

    assert receiver.times[1] - receiver.times[0] >= 0.95  # the backoff alone would wait at most 0.2 s


def test_it_ships_in_batches_in_order_and_each_record_once(tmp_path):
    receiver = Receiver()
    with (
        http_server(receiver) as url,
        Pipeline(tmp_path, url=url, key="k", batch_size=40, registry=CollectorRegistry(), **FAST) as pipeline,
    ):
        for n in range(250):
            pipeline.submit({"record_id": f"r{n}"})
        assert pipeline.flush(timeout=10)

    assert receiver.record_ids() == [f"r{n}" for n in range(250)]
    assert max(len(b.splitlines()) for b in receiver.bodies) == 40


def test_a_refused_key_stops_shipping_loudly_and_keeps_the_spool(tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    receiver = Receiver(*[(401, {})] * 5)
    with http_server(receiver) as url:
        pipeline = Pipeline(tmp_path, url=url, key="wrong", registry=CollectorRegistry(), **FAST).start()
        for n in range(3):
            pipeline.submit({"record_id": f"r{n}"})
        started = time.monotonic()
        assert not pipeline.flush(timeout=10)
        assert time.monotonic() - started < 5  # it does not wait out the timeout
        pipeline.close(timeout=1)

    assert len(receiver.bodies) == 1
    assert pipeline.halted is not None and "401" in pipeline.halted
    assert "shipping STOPPED, 3 records kept" in caplog.text
    with Spool(tmp_path) as spool:
        assert spool.pending == 3


def test_submit_durable_returns_once_the_records_are_on_disk(tmp_path):
    with Pipeline(tmp_path, url="http://127.0.0.1:9", key="k", registry=CollectorRegistry(), ship=False) as pipeline:
        taken = pipeline.submit_durable([{"record_id": "d1"}, {"record_id": "d2"}], timeout=5)
        on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("*.seg"))

    assert taken == 2
    assert on_disk == b'{"record_id":"d1"}\n{"record_id":"d2"}\n'


def test_submit_only_queues_and_drops_over_the_queue_limit(tmp_path):
    registry = CollectorRegistry()
    pipeline = Pipeline(tmp_path, url="http://127.0.0.1:9", key="k", registry=registry, max_queue=5, ship=False)
    for n in range(8):
        pipeline.submit({"record_id": f"r{n}"})  # the writer is not running: nothing but a put

    assert metric(registry, "costplatform_shipper_queued_records") == 5
    assert metric(registry, "costplatform_shipper_dropped_records_total") == 3
    pipeline.start()
    assert pipeline.sync(timeout=5)
    assert pipeline.spool.pending == 5
    pipeline.close(timeout=0)


def test_a_full_spool_drops_the_oldest_and_counts_them(tmp_path):
    registry = CollectorRegistry()
    with Pipeline(
        tmp_path, url="http://127.0.0.1:9", key="k", registry=registry, ship=False, max_bytes=4000, segment_bytes=1000
    ) as pipeline:
        for n in range(100):
            pipeline.submit({"record_id": f"r{n:03d}", "pad": "x" * 60})
            if n % 10 == 9:
                assert pipeline.sync(timeout=5)
        pending = pipeline.spool.pending

    assert metric(registry, "costplatform_shipper_dropped_records_total") == 100 - pending > 0
    assert metric(registry, "costplatform_shipper_queued_records") == pending


def test_a_full_spool_refuses_durable_submissions(tmp_path):
    with Pipeline(
        tmp_path, url="http://127.0.0.1:9", key="k", registry=CollectorRegistry(), ship=False, max_bytes=300,
        when_full="refuse",
    ) as pipeline:  # fmt: skip
        assert pipeline.submit_durable([{"record_id": "r1", "pad": "x" * 100}], timeout=5) == 1
        assert pipeline.submit_durable([{"record_id": "r2", "pad": "x" * 200}], timeout=5) == 0


def test_it_reports_the_age_of_the_oldest_unshipped_record(tmp_path):
    registry = CollectorRegistry()
    with Pipeline(tmp_path, url=f"http://127.0.0.1:{free_port()}", key="k", registry=registry, **FAST) as pipeline:
        hour_ago = datetime.now(UTC) - timedelta(hours=1)
        pipeline.submit({"record_id": "old", "ts": hour_ago.isoformat()})
        pipeline.submit({"record_id": "new", "ts": datetime.now(UTC).isoformat()})
        assert pipeline.sync(timeout=5)

        assert 3590 < metric(registry, "costplatform_shipper_oldest_record_age_seconds") < 3700
        assert metric(registry, "costplatform_shipper_queued_records") == 2
        pipeline.close(timeout=0.3)
    assert metric(registry, "costplatform_shipper_failed_requests_total") >= 1


# --- a real costplatform -----------------------------------------------------------------


# --- the one sender, as the file sender (collectors.send) uses it ------------------------------


def test_the_file_sender_retries_a_batch_after_server_errors_and_counts_what_the_api_took():
    receiver = Receiver((503, {}), (429, {}))
    lines = [json.dumps({"record_id": f"r{n}", "ts": "2025-03-01T10:00:00Z"}).encode() for n in range(5)]
    with http_server(receiver) as url:
        summary = send_lines(lambda: lines, url=url, key="k", batch=3)

    assert (summary.batches, summary.lines, summary.accepted) == (2, 5, 5)
    assert receiver.record_ids() == ["r0", "r1", "r2"] * 3 + ["r3", "r4"]
    assert receiver.times[2] - receiver.times[0] >= 1.4  # 0.5 s, then 1 s


def test_the_sender_names_a_refusal_and_gzips_with_the_key_when_asked():
    seen: list[dict[str, str]] = []

    def refuse(request: BaseHTTPRequestHandler, body: bytes) -> None:
        seen.append(dict(request.headers.items()))
        reply(request, 400, {"detail": "not a batch"})

    with http_server(refuse) as url:
        sender = Sender(url, "cpk_secret", compress=True)
        with pytest.raises(SendError, match=r"HTTP 400 from .*/api/v1/records: .*not a batch"):
            sender.deliver(b'{"record_id": "r1"}\n')
        sender.close()

    (headers,) = seen  # a refusal is not retried
    assert headers["Authorization"] == "Bearer cpk_secret" and headers["Content-Encoding"] == "gzip"


def test_the_sender_gives_up_on_a_platform_that_stays_down():
    sender = Sender(f"http://127.0.0.1:{free_port()}", "k", timeout=1)

    with pytest.raises(SendError, match="cannot reach"):
        sender.deliver(b"{}\n", retries=1)


@pytest.mark.usefixtures("truncate_records")
def test_it_ships_into_the_platform(live_server, tmp_path):
    key = collector_key()
    registry = CollectorRegistry()
    bad = record(model=DELETE)
    with Pipeline(tmp_path, url=live_server.url, key=key.secret, registry=registry, **FAST) as pipeline:
        for _ in range(300):
            pipeline.submit(record())
        pipeline.submit(bad)
        assert pipeline.flush(timeout=20)

    assert stored(key) == 300
    assert Rejection.objects.filter(record_id=bad["record_id"]).exists()  # refused, kept there, acknowledged here
    assert metric(registry, "costplatform_shipper_shipped_records_total") == 301
    assert metric(registry, "costplatform_shipper_queued_records") == 0


@pytest.mark.usefixtures("truncate_records")
def test_every_record_arrives_once_when_the_platform_comes_back(live_server, tmp_path):
    key = collector_key()
    registry = CollectorRegistry()
    port = free_port()  # nothing listens there yet: the platform is down
    sent = [record() for _ in range(500)]
    with Pipeline(
        tmp_path, url=f"http://127.0.0.1:{port}", key=key.secret, registry=registry, batch_size=100, **FAST
    ) as p:
        for item in sent[:300]:
            p.submit(item)
        assert not p.flush(timeout=0.5)
        assert metric(registry, "costplatform_shipper_failed_requests_total") >= 1

        # Up, but the first two answers are lost after the platform stored their batches.
        with http_server(forward_to(live_server.url, lose_answers=2), port=port):
            for item in sent[300:]:
                p.submit(item)
            assert p.flush(timeout=20)

    assert stored(key) == 500
    assert set(Record.objects.filter(source=key.key).values_list("record_id", flat=True)) == {
        r["record_id"] for r in sent
    }
    assert metric(registry, "costplatform_shipper_shipped_records_total") == 500


@pytest.mark.usefixtures("truncate_records")
def test_a_restarted_pipeline_ships_what_the_last_one_left(live_server, tmp_path):
    key = collector_key()
    first = Pipeline(
        tmp_path, url=f"http://127.0.0.1:{free_port()}", key=key.secret, registry=CollectorRegistry(), **FAST
    )
    first.start()
    for _ in range(200):
        first.submit(record())
    assert not first.close(timeout=0.2)  # stopped with the platform unreachable

    with Pipeline(tmp_path, url=live_server.url, key=key.secret, registry=CollectorRegistry(), **FAST) as second:
        assert second.spool.pending == 200
        assert second.flush(timeout=20)

    assert stored(key) == 200


@pytest.mark.usefixtures("truncate_records")
def test_the_command_ships_a_left_spool_once_and_exits(live_server, tmp_path):
    key = collector_key()
    with Spool(tmp_path) as spool:
        spool.append([record() for _ in range(120)])

    status = shipper_command.main(
        ["--spool", str(tmp_path), "--url", live_server.url, "--key", key.secret, "--once", "--timeout", "20"]
    )

    assert status == 0
    assert stored(key) == 120
    with Spool(tmp_path) as spool:
        assert spool.pending == 0


def test_the_command_gives_up_with_once_and_a_timeout(tmp_path):
    with Spool(tmp_path) as spool:
        spool.append([{"record_id": "r1"}])

    status = shipper_command.main(
        [
            "--spool",
            str(tmp_path),
            "--url",
            f"http://127.0.0.1:{free_port()}",
            "--key",
            "k",
            "--once",
            "--timeout",
            "0.5",
        ]
    )

    assert status == 1


@pytest.mark.slow
def test_the_module_runs_without_django():
    code = "import sys, collectors.shipper; assert not any(m.startswith(('django', 'apps')) for m in sys.modules)"
    root = Path(__file__).parents[2]

    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
    helped = subprocess.run(
        [sys.executable, "-m", "collectors.shipper", "--help"], cwd=root, capture_output=True, text=True
    )
    assert helped.returncode == 0 and "--spool" in helped.stdout
