"""An OTLP/HTTP metrics receiver on loopback for the GenAI token-metrics tests of every edge
(wire/genai_metrics.py): each ExportMetricsServiceRequest decoded with opentelemetry-proto."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric

from wire import record as rec
from wire.contract import RecordV1


class Receiver:
    """An OTLP/HTTP metrics endpoint on loopback: every request body decoded and kept."""

    def __init__(self, stall: float = 0.0) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.content_types: list[str] = []
        self.authorizations: list[str | None] = []
        self.stall = stall
        self.busy = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.busy.set()
                time.sleep(receiver.stall)
                message = ExportMetricsServiceRequest()
                message.ParseFromString(body)
                receiver.content_types.append(self.headers["Content-Type"])
                receiver.authorizations.append(self.headers.get("Authorization"))
                receiver.requests.append(message)
                answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/metrics" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def latest(self) -> dict[str, Metric]:
        """The metrics of the last export (cumulative: each holds every record so far)."""
        out: dict[str, Metric] = {}
        for resource in self.requests[-1].resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out[metric.name] = metric
        return out


def attrs(pairs: Any) -> dict[str, Any]:
    def value(kv: KeyValue) -> Any:
        return getattr(kv.value, kv.value.WhichOneof("value"))

    return {kv.key: value(kv) for kv in pairs}


@pytest.fixture(name="receiver")
def receiver_fixture() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def records() -> list[dict[str, Any]]:
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    made = [
        rec.make_record(
            record_id="a",
            ts=ts,
            model="tiny",
            endpoint="chat.completions",
            tokens={"prompt": 400, "prompt_cached": 256, "completion": 30, "reasoning": 12},
            status="ok",
            finish_reason="stop",
        ),
        rec.make_record(
            record_id="b",
            ts=ts,
            model="tiny",
            endpoint="chat.completions",
            tokens={"prompt": 90, "completion": 7},
            status="ok",
            finish_reason="length",
        ),
        rec.make_record(
            record_id="c",
            ts=ts,
            model="tiny",
            endpoint="chat.completions",
            tokens={"prompt": 50, "completion": 3},
            status="aborted",
            finish_reason="abort",
        ),
        rec.make_record(
            record_id="d",
            ts=ts,
            model="tiny",
            endpoint="completions",
            tokens={"prompt": 20, "prompt_cached": 0, "completion": 5},
            status="ok",
            finish_reason="stop",
        ),
    ]
    for record in made:
        msgspec.convert(record, RecordV1, strict=False)  # every one a valid record v1
    return made


def sums(metric: Metric) -> dict[tuple[tuple[str, Any], ...], int]:
    points = metric.sum.data_points if metric.HasField("sum") else metric.histogram.data_points
    return {
        tuple(sorted(attrs(p.attributes).items())): int(p.as_int if metric.HasField("sum") else p.sum) for p in points
    }
