"""Ship a spool left behind by a stopped server to the ingest API.

    python -m collectors.shipper --spool DIR --url URL --key KEY [--metrics-port N] [--once]

The spool, the shipping loop and its retries are wire.shipper's (the same code a server's
Pipeline runs); docs/collectors.md has the details.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path

from wire.send import sender_arguments, sender_options
from wire.shipper import Pipeline, serve_metrics
from wire.spool import SpoolLocked

log = logging.getLogger("collectors.shipper")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.shipper",
        description="Ship the records in a spool directory to the ingest API, until stopped (or empty, with --once).",
        epilog="Exit status: 0 when done (or stopped by a signal), 1 when --once could not ship "
        "everything (platform unreachable past --timeout, or the key refused), 2 on bad arguments.",
    )
    parser.add_argument("--spool", required=True, type=Path, help="spool directory")
    sender_arguments(parser, batch=2000)
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    parser.add_argument("--once", action="store_true", help="ship until the spool is empty, then exit")
    parser.add_argument("--timeout", type=float, help="with --once: give up after this many seconds")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, key = sender_options(parser, argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        return _run(args, key, stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run(args: argparse.Namespace, key: str, stop: threading.Event) -> int:
    try:
        pipeline = Pipeline(args.spool, url=args.url, key=key, batch_size=args.batch, compress=args.gzip)
    except (OSError, ValueError, SpoolLocked) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.metrics_port is not None:
        serve_metrics(args.metrics_port)
    pipeline.start()
    log.info("shipping %d records from %s to %s", pipeline.spool.pending, args.spool, pipeline.sender.url)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    done = False
    while not stop.is_set() and pipeline.halted is None:
        if args.once and pipeline.flush(timeout=1.0):
            done = True
            break
        if deadline is not None and time.monotonic() > deadline:
            break
        stop.wait(0 if args.once else 1.0)
    left = pipeline.spool.pending
    pipeline.close(timeout=1.0 if done else 0)
    log.info("stopped; %d records left in %s", left, args.spool)
    return 1 if args.once and not done else 0


if __name__ == "__main__":
    sys.exit(main())
