#!/usr/bin/env python
"""Shipper benchmark: how fast records become durable through wire.shipper.Pipeline.

  (a) submit(): the cost of one call on the caller's thread (the serving event loop's), p50/p99;
  (b) sustained: records/s from the first submit() until sync() says all of them are fsync'd
      in the spool (the writer's group commit), with the mean group size (records an fsync);
      and submit() paced at 20,000 and 40,000 records/s for 5 s: the rate kept, the deepest
      queue and the slowest time from submit to durable (a sync() marker every 100 ms);
  (c) submit_durable(): records/s for callers that block until fsync, at a few batch sizes,
      from several threads at once (as a proxy's or OTLP receiver's request handlers would);
  (d) shipping: records/s read from the spool and POSTed to a loopback sink that answers like
      the ingest API without storing anything (the shipper's own cost, not the platform's).

Records are realistic token records (about 600 bytes of JSON), generated before any timing.
The spool lives in a temporary directory (--dir to put it on another disk). No database, no
Django: `python bench/shipper.py` (`--records 50000` for a quick run). See docs/collectors.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

from prometheus_client import CollectorRegistry  # noqa: E402

from wire.shipper import Pipeline  # noqa: E402

TARGET_RATE = 20_000  # records/s sustained into the spool
CLOSED_URL = "http://127.0.0.1:9"  # never contacted: (a)-(c) run without the shipper thread


def records(count: int, prefix: str) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    return [
        {
            "record_id": f"{prefix}-{n:09d}",
            "ts": (now - timedelta(milliseconds=n)).isoformat(),
            "model": "qwen2.5-7b-instruct",
            "model_version": "awq-int4",
            "endpoint": "chat.completions",
            "dims": {"business_line": "customer-service", "team": "cs-bot", "feature": "faq", "env": "prod"},
            "tokens": {"prompt": 1200 + n % 500, "prompt_cached": 512, "completion": 180 + n % 90, "system": 400},
            "outcome": {"status": "ok", "finish_reason": "stop"},
            "timing": {"queued": 3, "ttft": 120, "prefill": 90, "decode": 800, "e2e": 930},
            "prompt_hash": f"{n:032x}",
        }
        for n in range(count)
    ]


@contextmanager
def pipeline(directory: Path, **kwargs: Any) -> Iterator[Pipeline]:
    with tempfile.TemporaryDirectory(dir=directory) as spool_dir:
        p = Pipeline(spool_dir, url=kwargs.pop("url", CLOSED_URL), key="bench", registry=CollectorRegistry(), **kwargs)
        yield p.start()
        p.close(timeout=5)


def count_appends(p: Pipeline) -> list[int]:
    """Wrap the spool's append to count the groups it writes (one fsync each)."""
    groups: list[int] = []
    append = p.spool.append

    def counted(lines: Any) -> int:
        groups.append(len(lines))
        return append(lines)

    p.spool.append = counted  # type: ignore[method-assign]
    return groups


def measure_submit(directory: Path, batch: list[dict[str, Any]]) -> dict[str, float]:
    with pipeline(directory, ship=False) as p:
        groups = count_appends(p)
        costs = []
        began = time.perf_counter()
        for record in batch:
            t = time.perf_counter_ns()
            p.submit(record)
            costs.append(time.perf_counter_ns() - t)
        submitted = time.perf_counter() - began
        assert p.sync(timeout=600), "the writer did not catch up"
        elapsed = time.perf_counter() - began
        assert p.spool.pending == len(batch), (p.spool.pending, len(batch))
        spool_bytes = p.spool.size_bytes
    costs.sort()
    return {
        "records": len(batch),
        "submit_p50_us": costs[len(costs) // 2] / 1000,
        "submit_p99_us": costs[len(costs) * 99 // 100] / 1000,
        "submit_s": submitted,
        "durable_s": elapsed,
        "rate": len(batch) / elapsed,
        "fsyncs": len(groups),
        "group": len(batch) / max(len(groups), 1),
        "bytes_per_record": spool_bytes / len(batch),
    }


def measure_paced(directory: Path, batch: list[dict[str, Any]], rate: int) -> dict[str, float]:
    """submit() at a steady rate (20 records a ms-ish tick) with a sync() marker every 100 ms:
    the achieved rate, the deepest queue seen and the slowest submit-to-durable time."""
    lags: list[float] = []
    deepest = 0
    with pipeline(directory, ship=False) as p:
        began = time.perf_counter()
        step = 20
        for start in range(0, len(batch), step):
            due = began + start / rate
            while (now := time.perf_counter()) < due:
                time.sleep(min(due - now, 0.001))
            for record in batch[start : start + step]:
                p.submit(record)
            deepest = max(deepest, p._queue.qsize())
            if start % (rate // 10) < step:
                marked = time.perf_counter()
                threading.Thread(target=lambda m=marked: p.sync(60) and lags.append(time.perf_counter() - m)).start()
        assert p.sync(timeout=60)
        elapsed = time.perf_counter() - began
    return {"rate": len(batch) / elapsed, "deepest": deepest, "lag_ms": max(lags) * 1000 if lags else 0.0}


def measure_durable(directory: Path, batch: list[dict[str, Any]], size: int, threads: int) -> dict[str, float]:
    chunks = [batch[i : i + size] for i in range(0, len(batch), size)]
    with pipeline(directory, ship=False) as p:
        groups = count_appends(p)
        began = time.perf_counter()
        workers = [threading.Thread(target=_durable_worker, args=(p, chunks[i::threads])) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - began
        assert p.spool.pending == len(batch)
    return {"size": size, "threads": threads, "rate": len(batch) / elapsed, "fsyncs": len(groups)}


def _durable_worker(p: Pipeline, chunks: list[list[dict[str, Any]]]) -> None:
    for chunk in chunks:
        assert p.submit_durable(chunk, timeout=60) == len(chunk)


@contextmanager
def sink() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            data = json.dumps({"accepted": body.count(b"\n"), "duplicates": 0, "rejected": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def measure_shipping(directory: Path, batch: list[dict[str, Any]], compress: bool) -> dict[str, float]:
    with sink() as url, pipeline(directory, url=url, compress=compress, flush_interval=0.05) as p:
        began = time.perf_counter()
        for record in batch:
            p.submit(record)
        assert p.flush(timeout=600), "shipping did not finish"
        elapsed = time.perf_counter() - began
    return {"gzip": compress, "rate": len(batch) / elapsed}


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/shipper.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records for (a), (b) and (d) (default 200,000)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where the spools go")
    parser.add_argument("--paced-seconds", type=float, default=5.0, help="seconds of each paced run of (b) (default 5)")
    args = parser.parse_args(argv)
    run: Callable[[str], list[dict[str, Any]]] = lambda prefix: records(args.records, prefix)  # noqa: E731

    print(f"{args.records:,} records, spool under {args.dir}", flush=True)
    sub = measure_submit(args.dir, run("a"))
    table(
        "(a)+(b) submit() then sync(): sustained into the spool",
        ["records", "submit p50 µs", "submit p99 µs", "durable s", "records/s", "fsyncs", "records/fsync", "B/record"],
        [[f"{sub['records']:,}", f"{sub['submit_p50_us']:.2f}", f"{sub['submit_p99_us']:.2f}",
          f"{sub['durable_s']:.2f}", f"{sub['rate']:,.0f}", f"{sub['fsyncs']:,}", f"{sub['group']:.0f}",
          f"{sub['bytes_per_record']:.0f}"]],
    )  # fmt: skip
    paced = [
        measure_paced(args.dir, records(int(rate * args.paced_seconds), "p"), rate)
        for rate in (TARGET_RATE, 2 * TARGET_RATE)
    ]
    table(
        f"(b) submit() paced for {args.paced_seconds:g} s, a sync() every 100 ms",
        ["asked/s", "records/s", "deepest queue", "worst sync ms"],
        [[f"{r:,}", f"{m['rate']:,.0f}", f"{m['deepest']:,}", f"{m['lag_ms']:.1f}"]
         for r, m in zip((TARGET_RATE, 2 * TARGET_RATE), paced, strict=True)],
    )  # fmt: skip
    durable = [
        measure_durable(args.dir, records(min(args.records, n), "c"), size, threads)
        for size, threads, n in ((1, 8, 20_000), (64, 8, 100_000), (512, 4, 200_000))
    ]
    table(
        "(c) submit_durable(): blocking until fsync",
        ["batch", "threads", "records/s", "fsyncs"],
        [[str(d["size"]), str(d["threads"]), f"{d['rate']:,.0f}", f"{d['fsyncs']:,}"] for d in durable],
    )
    shipping = [measure_shipping(args.dir, run(f"d{c}"), c) for c in (False, True)]
    table(
        "(d) submit() to a loopback sink: durable and shipped",
        ["gzip", "records/s"],
        [["yes" if s["gzip"] else "no", f"{s['rate']:,.0f}"] for s in shipping],
    )
    met = sub["rate"] >= TARGET_RATE and paced[0]["rate"] >= 0.98 * TARGET_RATE
    verdict = "met" if met else "MISSED"
    print(f"\nsustained into the spool: {sub['rate']:,.0f} records/s (target {TARGET_RATE:,}): {verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
