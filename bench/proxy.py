#!/usr/bin/env python
"""Proxy benchmark: the latency collectors.proxy adds, measured side by side with going direct.

One loopback OpenAI-like upstream (tests/collectors/openai_upstream.py, in its own process)
and one proxy started from its command line (`python -m collectors.proxy`, own process, with a
real Pipeline and spool; its shipper points at a closed port, so it keeps retrying in the
background as it would with the platform down). The client (this process, aiohttp with
keep-alive) alternates a direct request and a proxied one, so both see the same machine at
the same moment, for:

  chat        non-streamed chat completion, time to the whole body
  stream      streamed chat completion (9 events; the proxy asks for usage and drops that
              chunk), time to the first event (TTFB) and to [DONE]

at concurrency 1 and --concurrency (pairs in flight at once). Prints p50/p99 of each and the
added latency (proxied minus direct, per percentile).

    .venv/bin/python bench/proxy.py [--requests 2000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

import aiohttp  # noqa: E402

from collectors.httpserve import new_event_loop  # noqa: E402

CHAT = {"model": "qwen2.5-7b-instruct", "messages": [{"role": "user", "content": "Where is my refund?"}]}
STREAM = CHAT | {"stream": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_upstream(port: int) -> None:
    from aiohttp import web

    from tests.collectors.openai_upstream import Upstream

    web.run_app(Upstream().app(), host="127.0.0.1", port=port, access_log=None, print=None, loop=new_event_loop())


def wait_for(url: str, timeout: float = 20.0) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


async def one(session: aiohttp.ClientSession, base: str, body: dict) -> tuple[float, float]:
    """(time to first byte, time to the end) in ms."""
    started = time.perf_counter()
    async with session.post(f"{base}/v1/chat/completions", json=body) as response:
        first = None
        async for _ in response.content.iter_any():
            first = first or time.perf_counter()
        end = time.perf_counter()
        assert response.status == 200, response.status
    return ((first or end) - started) * 1000, (end - started) * 1000


async def measure(direct: str, proxied: str, body: dict, requests: int, concurrency: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"direct ttfb": [], "direct": [], "proxy ttfb": [], "proxy": []}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for base in (direct, proxied):  # warm the connections and the proxy's pool
            await asyncio.gather(*(one(session, base, body) for _ in range(concurrency)))
        left = requests

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                for name, base in (("direct", direct), ("proxy", proxied)):
                    ttfb, total = await one(session, base, body)
                    out[f"{name} ttfb"].append(ttfb)
                    out[name].append(total)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def cpu_ms(pid: int) -> float:
    """User + system CPU of a process so far, in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def report(case: str, concurrency: int, got: dict[str, list[float]], stream: bool, cpu: float) -> None:
    metrics = [("ttfb", " ttfb"), ("total", "")] if stream else [("total", "")]
    for label, suffix in metrics:
        d50, d99 = pct(got[f"direct{suffix}"], 50), pct(got[f"direct{suffix}"], 99)
        p50, p99 = pct(got[f"proxy{suffix}"], 50), pct(got[f"proxy{suffix}"], 99)
        print(
            f"| {case} | {concurrency} | {label} | {len(got['proxy'])} | {d50:.2f} / {d99:.2f} | "
            f"{p50:.2f} / {p99:.2f} | **{p50 - d50:+.2f} / {p99 - d99:+.2f}** | {cpu:.3f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="pairs per case (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=16, help="pairs in flight in the concurrent run")
    parser.add_argument("--upstream-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_server:
        serve_upstream(args.upstream_server)
        return
    up_port, proxy_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    proxied = f"http://127.0.0.1:{proxy_port}"
    env = os.environ | {"PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        log = open(Path(tmp) / "proxy.log", "wb")
        processes = [
            subprocess.Popen([sys.executable, __file__, "--upstream-server", str(up_port)], env=env),
            subprocess.Popen(
                [sys.executable, "-m", "collectors.proxy", "--listen", f"127.0.0.1:{proxy_port}", "--upstream",
                 upstream, "--spool", f"{tmp}/spool", "--platform-url", "http://127.0.0.1:9", "--key", "cpk_bench",
                 "--hash-key-file", __file__, "--dim", "business_line=bench"],
                env=env, cwd=REPO, stdout=log, stderr=log,
            ),
        ]  # fmt: skip
        try:
            wait_for(f"{upstream}/v1/models")
            wait_for(f"{proxied}/v1/models")
            print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.requests} pairs per case; ms")
            print(
                "| case | concurrency | latency | pairs | direct p50 / p99 | proxy p50 / p99 | added p50 / p99 "
                "| proxy CPU ms / request |"
            )
            print("|---|---|---|---|---|---|---|---|")
            loop = new_event_loop()
            for concurrency in (1, args.concurrency):
                for case, body in (("chat", CHAT), ("stream", STREAM)):
                    before = cpu_ms(processes[1].pid)
                    got = loop.run_until_complete(measure(upstream, proxied, body, args.requests, concurrency))
                    cpu = (cpu_ms(processes[1].pid) - before) / (args.requests + concurrency)
                    report(case, concurrency, got, body is STREAM, cpu)
            loop.close()
            spooled = sum(p.stat().st_size for p in (Path(tmp) / "spool").rglob("*.seg"))
            print(f"spool after the run: {spooled} bytes of records")
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
            log.close()


if __name__ == "__main__":
    main()
