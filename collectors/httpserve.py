"""What the collectors that run an HTTP server share: the record sink, the command line
options for the spool and the platform, and running an aiohttp app until a signal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from wire import keys

log = logging.getLogger("collectors")


class RecordSink(Protocol):
    """Where records go: wire.shipper.Pipeline in production."""

    def submit(self, record: Mapping[str, Any]) -> None: ...

    def submit_durable(self, records: Iterable[Mapping[str, Any]], timeout: float | None = None) -> int: ...


def host_port(listen: str) -> tuple[str, int]:
    """ "127.0.0.1:4318" -> ("127.0.0.1", 4318); "[::1]:80" and ":80" too."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise argparse.ArgumentTypeError(f"{listen!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def dim_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def add_common_arguments(parser: argparse.ArgumentParser, *, listen: str) -> None:
    parser.add_argument("--listen", default=listen, type=host_port, help="HOST:PORT (default %(default)s)")
    parser.add_argument("--spool", required=True, type=Path, help="spool directory (records wait here, durable)")
    parser.add_argument("--platform-url", required=True, help="costplatform URL, e.g. http://127.0.0.1:8000")
    keys.collector_key_arguments(parser)
    parser.add_argument(
        "--dim", type=dim_pair, action="append", default=[], metavar="KEY=VALUE", help="a default dim (repeatable)"
    )
    parser.add_argument("--metrics-port", type=int, help="serve the shipper's Prometheus metrics on this port")
    parser.add_argument("--when-full", choices=["drop-oldest", "refuse"], default="drop-oldest")


def add_attribution_argument(parser: argparse.ArgumentParser, *, required: bool, tokens: str) -> None:
    parser.add_argument(
        "--attribution-map",
        type=Path,
        required=required,
        default=os.environ.get("COSTPLATFORM_ATTRIBUTION_MAP") if not required else None,
        help=f"TOML map of callers ({tokens}) to their dims and what they may claim; re-read when it changes "
        "(README: Writing an attribution map)",
    )


def policy_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The attribution policy of --attribution-map and --dim; a broken map stops the start."""
    from wire.attribution import MapError, Policy

    try:
        return Policy(args.attribution_map, dict(args.dim))
    except (MapError, OSError) as exc:
        parser.error(f"--attribution-map {args.attribution_map}: {exc}")


collector_key = keys.collector_key


def pipeline_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    from wire.shipper import Pipeline, serve_metrics

    args.dim = dict(args.dim)
    pipeline = Pipeline(args.spool, url=args.platform_url, key=collector_key(parser, args), when_full=args.when_full)
    if args.metrics_port is not None:
        serve_metrics(args.metrics_port)
    return pipeline


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (vLLM brings it): a proxy's added latency is mostly the loop's."""
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def run_app(app: web.Application, listen: tuple[str, int], pipeline: Any) -> None:
    """Serve until SIGINT/SIGTERM, then close the pipeline (queued records reach the spool)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def close_pipeline(_: web.Application) -> None:
        # Records are durable in the spool already; what does not ship now ships at the next start.
        await asyncio.to_thread(pipeline.close, 2.0)

    app.on_cleanup.append(close_pipeline)
    pipeline.start()
    host, port = listen
    web.run_app(app, host=host, port=port, access_log=None, loop=new_event_loop(), print=log.info)


class ServerThread:
    """An aiohttp app served on its own event loop in a daemon thread: for tests, benchmarks
    and embedding in a program that is not asyncio. `url` is http://host:port."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.url = ""
        self.loop = new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._run, name="aiohttp-server", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = self._runner.addresses
        self.port = sockets[0][1]
        self.url = f"http://{self.host}:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait()
        if self._error:
            raise self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._runner is not None and self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
