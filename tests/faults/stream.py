"""Records for the fault suite, and the process that ships them through the real shipper.

    python -m tests.faults.stream --url URL --key KEY --spool DIR --prefix P --count N \
        --start 2026-09-01T00:00:00+00:00 --hours H --rate R --progress FILE --timeout S

The records are a pure function of (prefix, count, start, hours), so the test knows what was
sent without asking the sender. The process submits them at `rate` records a second through
wire.shipper.Pipeline (spool, fsync, retries), writes how many it has submitted to the
progress file as it goes, then waits for everything to be shipped; exit status 0 when it was.
No Django here: the shipper runs where the platform does not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from wire.contract import TOKEN_FIELDS

BUSINESS_LINES = ("search", "customer-service", "ads")


def record_at(prefix: str, n: int, start: datetime, hours: int) -> dict[str, Any]:
    """Record number n: spread over [start, start + hours), tokens varying with n."""
    seconds = hours * 3600
    ts = start + timedelta(seconds=(n * 7919) % seconds, microseconds=n % 1000)
    prompt = 300 + n % 1700
    return {
        "record_id": f"{prefix}-{n:07d}",
        "ts": ts.isoformat(),
        "model": "qwen2.5-7b-instruct",
        "model_version": "awq-int4",
        "endpoint": "chat.completions",
        "dims": {"business_line": BUSINESS_LINES[n % 3], "team": f"team-{n % 5}", "env": "prod"},
        "tokens": {
            "prompt": prompt,
            "prompt_cached": (n % 4) * prompt // 8,
            "completion": 20 + n % 400,
            "system": 100 + n % 50,
            "tool": (n % 3) * 40,
        },
        "outcome": {"status": "ok", "finish_reason": "stop" if n % 11 else "length"},
        "timing": {"queued": 2, "ttft": 80 + n % 40, "prefill": 60, "decode": 500, "e2e": 600},
    }


def records(prefix: str, count: int, start: datetime, hours: int) -> Iterator[dict[str, Any]]:
    for n in range(count):
        yield record_at(prefix, n, start, hours)


@dataclass
class Sent:
    """What a stream sent: its record ids and the sum of each token count."""

    ids: set[str] = field(default_factory=set)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0))

    @classmethod
    def of(cls, items: list[dict[str, Any]]) -> Sent:
        sent = cls()
        for item in items:
            sent.ids.add(item["record_id"])
            for name in TOKEN_FIELDS:
                sent.tokens[name] += item["tokens"].get(name, 0)
        return sent


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.stream")
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--spool", required=True, type=Path)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--start", type=datetime.fromisoformat, required=True)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--rate", type=float, default=1000.0, help="records a second")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--progress", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to ship everything after submitting")
    return parser


def main(argv: list[str] | None = None) -> int:
    from prometheus_client import CollectorRegistry

    from wire.shipper import Pipeline

    args = _parser().parse_args(argv)
    registry = CollectorRegistry()
    pipeline = Pipeline(
        args.spool, url=args.url, key=args.key, batch_size=args.batch, registry=registry, flush_interval=0.05,
        backoff_base=0.05, backoff_cap=0.5, timeout=10.0,
    ).start()  # fmt: skip
    began = time.monotonic()
    chunk = max(int(args.rate / 20), 1)  # 20 chunks a second
    for first in range(0, args.count, chunk):
        for n in range(first, min(first + chunk, args.count)):
            pipeline.submit(record_at(args.prefix, n, args.start, args.hours))
        done = min(first + chunk, args.count)
        args.progress.write_text(json.dumps({"submitted": done}))
        time.sleep(max(began + done / args.rate - time.monotonic(), 0))
    shipped = pipeline.flush(timeout=args.timeout)
    summary = {
        "submitted": args.count,
        "shipped": registry.get_sample_value("costplatform_shipper_shipped_records_total"),
        "failed_requests": registry.get_sample_value("costplatform_shipper_failed_requests_total"),
        "dropped": registry.get_sample_value("costplatform_shipper_dropped_records_total"),
        "done": shipped,
    }
    pipeline.close(timeout=1.0)
    args.progress.write_text(json.dumps(summary))
    return 0 if shipped else 1


if __name__ == "__main__":
    sys.exit(main())
