#!/usr/bin/env python
"""Proxy benchmark: the latency collectors.proxy adds, measured side by side with going direct
and with LiteLLM's proxy, the most used peer, in front of the same upstream in the same run.

One loopback OpenAI-like upstream (tests/collectors/openai_upstream.py, in its own process)
and two proxies in front of it, each its own process:

  costplatform  `python -m collectors.proxy`, with a real Pipeline and spool; its shipper points
                at a closed port, so it keeps retrying in the background as it would with the
                platform down
  litellm       LiteLLM's proxy (`litellm --config`, no database, a master key, telemetry
                off), from its own virtual environment (.venv-litellm, made by `make
                bench-proxy` from bench/litellm-constraints.txt); --no-litellm leaves it out

The client (this process, aiohttp with keep-alive) sends one request down each path in turn
(direct, then each proxy), so all of them see the same machine at the same moment, for:

  chat        non-streamed chat completion, time to the whole body
  stream      streamed chat completion (9 events; the costplatform proxy asks for usage and
              drops that chunk), time to the first event (TTFB) and to [DONE]

at concurrency 1 and --concurrency (rounds in flight at once). Prints p50/p99 of each path, the
latency each proxy adds (proxied minus direct, per percentile), and each proxy's CPU per
request: the user + system CPU of its whole process tree over the case, divided by the
requests it served (the case's few warm-up requests included). --warmup rounds of each body go
first, unmeasured: a proxy's first requests pay for lazy imports and caches.

    .venv/bin/python bench/proxy.py [--requests 2000] [--concurrency 16] [--no-litellm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
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

# Every path gets the same bearer key: LiteLLM's proxy will not start without a master key (nor,
# rightly, serve without one), the costplatform proxy passes it on, the upstream ignores it.
KEY = f"sk-bench-{secrets.token_hex(32)}"
CHAT = {"model": "qwen2.5-7b-instruct", "messages": [{"role": "user", "content": "Where is my refund?"}]}
STREAM = CHAT | {"stream": True}
LITELLM = REPO / ".venv-litellm" / "bin" / "litellm"
# What keeps LiteLLM's proxy on loopback: no telemetry, the cost map it ships with rather than a
# download, no admin UI, no database (a DATABASE_URL in the caller's environment would give it one).
LITELLM_ENV = {
    "LITELLM_TELEMETRY": "False",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "DISABLE_ADMIN_UI": "True",
    "LITELLM_LOG": "ERROR",
    "LITELLM_MODE": "PRODUCTION",
    "HF_HUB_OFFLINE": "1",
    "NO_DOCS": "True",
}
LITELLM_UNSET = ("DATABASE_URL", "DIRECT_URL", "REDIS_URL", "REDIS_HOST", "STORE_MODEL_IN_DB")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_upstream(port: int) -> None:
    from aiohttp import web

    from tests.collectors.openai_upstream import Upstream

    web.run_app(Upstream().app(), host="127.0.0.1", port=port, access_log=None, print=None, loop=new_event_loop())


def wait_for(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 20.0) -> None:
    """Until `url` answers; a process that exits first, or a timeout, fails with its log's tail."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    state = f"exited with {process.returncode}" if process.poll() is not None else f"not up after {timeout:.0f} s"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"{url}: {state}\n{tail}")


def litellm_config(upstream: str) -> str:
    """The peer's config: the bench's model routed to the loopback upstream as an OpenAI-compatible
    server, the bench's key as master key (checked in memory: no database). JSON is YAML."""
    model = {
        "model_name": CHAT["model"],
        "litellm_params": {"model": f"openai/{CHAT['model']}", "api_base": f"{upstream}/v1", "api_key": "bench"},
    }
    config = {"model_list": [model], "litellm_settings": {"telemetry": False}, "general_settings": {"master_key": KEY}}
    return json.dumps(config, indent=2)


def litellm_env(base: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in base.items() if k not in LITELLM_UNSET} | LITELLM_ENV


def litellm_version(executable: Path) -> str:
    python = executable.parent / "python"
    script = "import importlib.metadata as m; print(m.version('litellm'))"
    return subprocess.run([python, "-c", script], capture_output=True, text=True, check=True).stdout.strip()


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


async def measure(paths: dict[str, str], body: dict, requests: int, concurrency: int) -> dict[str, list[float]]:
    """`requests` rounds, each one request down every path in turn, `concurrency` rounds at once."""
    out: dict[str, list[float]] = {f"{name}{suffix}": [] for name in paths for suffix in (" ttfb", "")}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, headers={"Authorization": f"Bearer {KEY}"}) as session:
        for base in paths.values():  # warm the connections and the proxies' pools
            await asyncio.gather(*(one(session, base, body) for _ in range(concurrency)))
        left = requests

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                for name, base in paths.items():
                    ttfb, total = await one(session, base, body)
                    out[f"{name} ttfb"].append(ttfb)
                    out[name].append(total)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _stat(pid: int, proc: Path) -> list[str]:
    # The command name (field 2) may hold spaces and parentheses; the fields after it do not.
    return (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def tree_cpu_ms(pid: int, proc: Path = Path("/proc")) -> float:
    """User + system CPU so far of a process and all its descendants, in ms.

    LiteLLM's proxy may run its server in worker processes, so a proxy's cost is its whole tree:
    each live process's own time, plus the time of the children it has already reaped
    (cutime/cstime; those are no longer in the tree, so nothing is counted twice)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = _stat(current, proc)
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))
            for task in (proc / str(current) / "task").iterdir():
                stack.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited while we looked
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def header(proxies: list[str]) -> None:
    cells = ["case", "concurrency", "latency", "rounds", "direct p50 / p99"]
    for name in proxies:
        cells += [f"{name} p50 / p99", f"{name} added p50 / p99", f"{name} CPU ms / request"]
    print("| " + " | ".join(cells) + " |")
    print("|" + "---|" * len(cells))


def report(case: str, concurrency: int, got: dict[str, list[float]], stream: bool, cpu: dict[str, float]) -> None:
    metrics = [("ttfb", " ttfb"), ("total", "")] if stream else [("total", "")]
    for label, suffix in metrics:
        d50, d99 = pct(got[f"direct{suffix}"], 50), pct(got[f"direct{suffix}"], 99)
        cells = [case, str(concurrency), label, str(len(got["direct"])), f"{d50:.2f} / {d99:.2f}"]
        for name, used in cpu.items():
            p50, p99 = pct(got[f"{name}{suffix}"], 50), pct(got[f"{name}{suffix}"], 99)
            cells += [f"{p50:.2f} / {p99:.2f}", f"**{p50 - d50:+.2f} / {p99 - d99:+.2f}**", f"{used:.3f}"]
        print("| " + " | ".join(cells) + " |")


def start(tmp: Path, args: argparse.Namespace, processes: dict[str, subprocess.Popen[bytes]]) -> dict[str, str]:
    """The upstream and the proxies, each its own process (kept in `processes`, to be stopped
    whatever happens), up and answering: the base URL of each path."""
    upstream = f"http://127.0.0.1:{free_port()}"
    env = os.environ | {"PYTHONPATH": str(REPO)}
    paths = {"direct": upstream}
    logs = {name: tmp / f"{name}.log" for name in ("upstream", "costplatform", "litellm")}
    serve = [sys.executable, __file__, "--upstream-server", upstream.rsplit(":", 1)[1]]
    processes["upstream"] = subprocess.Popen(serve, env=env)
    port = free_port()
    with open(logs["costplatform"], "wb") as log:
        processes["costplatform"] = subprocess.Popen(
            [sys.executable, "-m", "collectors.proxy", "--listen", f"127.0.0.1:{port}", "--upstream", upstream,
             "--spool", f"{tmp}/spool", "--platform-url", "http://127.0.0.1:9", "--key", "cpk_bench",
             "--hash-key-file", __file__, "--dim", "business_line=bench"],
            env=env, cwd=REPO, stdout=log, stderr=log,
        )  # fmt: skip
    paths["costplatform"] = f"http://127.0.0.1:{port}"
    if not args.no_litellm:
        port = free_port()
        (tmp / "litellm.yaml").write_text(litellm_config(upstream))
        with open(logs["litellm"], "wb") as log:
            processes["litellm"] = subprocess.Popen(
                [args.litellm, "--config", str(tmp / "litellm.yaml"), "--host", "127.0.0.1", "--port", str(port),
                 "--num_workers", "1"],
                env=litellm_env(dict(os.environ)), cwd=tmp, stdout=log, stderr=log,
            )  # fmt: skip
        paths["litellm"] = f"http://127.0.0.1:{port}"
    wait_for(f"{upstream}/v1/models", processes["upstream"], logs["upstream"])
    wait_for(f"{paths['costplatform']}/v1/models", processes["costplatform"], logs["costplatform"])
    if "litellm" in paths:  # its imports alone take many seconds on a busy machine
        wait_for(f"{paths['litellm']}/health/liveliness", processes["litellm"], logs["litellm"], timeout=300)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="`make bench-proxy` installs LiteLLM into .venv-litellm (bench/litellm-constraints.txt) first.",
    )
    parser.add_argument("--requests", type=int, default=2000, help="rounds per case (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=16, help="rounds in flight in the concurrent run")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured rounds of each body first")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's proxy out")
    parser.add_argument("--litellm", default=str(LITELLM), help="LiteLLM's command (default .venv-litellm/bin/litellm)")
    parser.add_argument("--upstream-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_server:
        serve_upstream(args.upstream_server)
        return
    if not args.no_litellm and not Path(args.litellm).exists():
        parser.error(f"{args.litellm} not found: `make bench-proxy` installs it, or pass --no-litellm")
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as name:
        tmp = Path(name)
        processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            paths = start(tmp, args, processes)
            proxies = [name for name in paths if name != "direct"]
            peer = f", litellm {litellm_version(Path(args.litellm))}" if "litellm" in paths else ""
            print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs{peer}, {args.requests} rounds per case; ms")
            header(proxies)
            loop = new_event_loop()
            for body in (CHAT, STREAM):  # first requests pay for lazy imports and caches: not measured
                loop.run_until_complete(measure(paths, body, args.warmup, 1))
            for concurrency in (1, args.concurrency):
                for case, body in (("chat", CHAT), ("stream", STREAM)):
                    before = {name: tree_cpu_ms(processes[name].pid) for name in proxies}
                    got = loop.run_until_complete(measure(paths, body, args.requests, concurrency))
                    served = args.requests + concurrency
                    cpu = {name: (tree_cpu_ms(processes[name].pid) - before[name]) / served for name in proxies}
                    report(case, concurrency, got, body is STREAM, cpu)
            loop.close()
            spooled = sum(p.stat().st_size for p in (tmp / "spool").rglob("*.seg"))
            print(f"costplatform spool after the run: {spooled} bytes of records")
        finally:
            for process in processes.values():
                process.terminate()
            for process in processes.values():
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()


if __name__ == "__main__":
    main()
