#!/usr/bin/env python
"""Serving benchmark: what the vLLM instrumentation (python -m serving) costs a real server.

Two real vLLM OpenAI servers on the CPU, serving the same tiny random-weight Llama (built
with devtools.tiny_model into a temporary directory), with the same vLLM flags:

  plain         python -m vllm.entrypoints.openai.api_server ...  (no COSTPLATFORM_* in its
                environment: the stat-logger plugin vLLM loads by entry point stays inert)
  instrumented  python -m serving ...  stat logger + middleware + engine hooks + emitter
                (system/tool segments tokenized with the chat template, structural tokens
                of JSON outputs) + durable spool + shipper, POSTing to a loopback sink (own
                process) that answers like the ingest API: 200 {"accepted": n, ...}

Both are started once and stay up; load rounds alternate between them (plain, instrumented,
instrumented, plain, ...: ABBA, so a drift of the machine falls on both alike). A round is
--seconds of closed-loop load at --concurrency from this process (aiohttp, keep-alive) with a
mix of chat requests sharing a long system prompt (3 business lines) and a tool call + tool
result in the history: 50% plain, 25% response_format json_object, 25% streamed with usage;
max_tokens fixed, ignore_eos. While one server takes load the other is idle; its CPU during
the rounds is reported, and at the end the instrumented server is stopped and the plain one
measured alone, to show whether keeping both up disturbs the comparison.

Reports throughput (completed requests/s) and end-to-end latency p50/p99 of each, the
ratio and the added latency against the targets (>= 0.98, <= 1 ms p50), the CPU of each
server's process tree per request, and the emitter's CPU per record
(costplatform_serving_record_build_seconds over costplatform_serving_records in /metrics).

    .venv/bin/python bench/serving_overhead.py [--rounds 6] [--seconds 20] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

import aiohttp  # noqa: E402

MODEL = "tiny-llama"
VLLM_FLAGS = [
    "--served-model-name", MODEL, "--host", "127.0.0.1", "--max-model-len", "4096", "--dtype", "float32",
    "--enable-prefix-caching", "--enable-prompt-tokens-details", "--enable-request-id-headers",
]  # fmt: skip
BUSINESS_LINES = ("customer-service", "search", "agents")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the sink the shipper posts to (own process) --------------------------------------------


def serve_sink(port: int) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    accepted = 0

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, document: dict[str, Any]) -> None:
            data = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            nonlocal accepted
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            n = sum(1 for line in body.split(b"\n") if line.strip())
            accepted += n
            self._answer({"accepted": n, "duplicates": 0, "rejected": []})

        def do_GET(self) -> None:
            self._answer({"accepted": accepted})

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


# --- the servers ---------------------------------------------------------------------------


class Server:
    def __init__(self, name: str, command: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.name, self.command, self.env, self.port, self.log = name, command, env, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 300) -> None:
        self.proc = subprocess.Popen(
            self.command, cwd=REPO, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=2).read()
                return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"{self.name} did not come up:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def cpu_s(self) -> float:
        """User + system CPU of the server's live process tree (its session) so far."""
        if self.proc is None:
            return 0.0
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == self.proc.pid:  # the session id
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"{self.url}/metrics", timeout=10).read().decode()
        return sum(float(m) for m in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def servers(tmp: Path, model: Path, sink_url: str, flags: list[str]) -> tuple[Server, Server]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("COSTPLATFORM_")}
    base |= {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "PYTHONPATH": str(REPO)}
    p1, p2 = free_port(), free_port()
    plain = Server(
        "plain",
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--port",
            str(p1),
            *flags,
        ],
        base,
        p1,
        tmp / "plain.log",
    )
    instrumented = Server(
        "instrumented",
        [
            sys.executable, "-m", "serving", "--model", str(model), "--port", str(p2), *flags,
            "--costplatform-url", sink_url, "--collector-key", "cpk_bench", "--spool", str(tmp / "spool"),
            "--source", "bench", "--dims", "env=bench", "--model-version", "random-fp32",
        ],
        base | {"COSTPLATFORM_STATS_WAIT": "2"},
        p2,
        tmp / "instrumented.log",
    )  # fmt: skip
    return plain, instrumented


# --- the load ------------------------------------------------------------------------------


def system_prompt(seed: int, words: int = 400) -> str:
    from devtools.tiny_model import WORDS

    rng = random.Random(seed)
    sentences: list[str] = []
    while sum(len(s.split()) for s in sentences) < words:
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize() + ".")
    return "You are the support assistant. " + " ".join(sentences)


SYSTEMS = {line: system_prompt(i) for i, line in enumerate(BUSINESS_LINES)}
TOOL_RESULT = json.dumps(
    {
        "order_id": "A-1042",
        "status": "shipped",
        "items": [{"sku": f"SKU-{i}", "name": "product", "quantity": i, "price": 9.5 * i} for i in range(1, 6)],
        "carrier": "post",
        "refund": {"eligible": True, "amount": 47.5, "policy": "return within 30 days of delivery"},
    }
)


def request(n: int, max_tokens: int) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(kind, body, headers) of the n-th request of a round."""
    line = BUSINESS_LINES[n % len(BUSINESS_LINES)]
    messages = [
        {"role": "system", "content": SYSTEMS[line]},
        {"role": "user", "content": f"Where is my refund for order A-{1000 + n % 97}? Ticket {n}."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"id": "A-1042"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT},
        {"role": "user", "content": "Please answer the customer."},
    ]
    body: dict[str, Any] = {"model": MODEL, "messages": messages, "max_tokens": max_tokens, "ignore_eos": True}
    kind = ("chat", "json", "chat", "stream")[n % 4]
    if kind == "json":
        body["response_format"] = {"type": "json_object"}
    elif kind == "stream":
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return kind, body, {"X-Costplatform-Business-Line": line, "X-Costplatform-Team": "bench"}


async def one(session: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]) -> float:
    started = time.perf_counter()
    async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as response:
        async for _ in response.content.iter_any():
            pass
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return (time.perf_counter() - started) * 1000


async def load(url: str, seconds: float, concurrency: int, max_tokens: int) -> dict[str, Any]:
    """Closed-loop load for `seconds`: latencies (ms, by kind) of the requests that finished in time."""
    latencies: dict[str, list[float]] = {"chat": [], "json": [], "stream": []}
    errors = 0
    counter = 0
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        began = time.perf_counter()
        deadline = began + seconds

        async def worker() -> None:
            nonlocal counter, errors
            while time.perf_counter() < deadline:
                counter += 1
                kind, body, headers = request(counter, max_tokens)
                try:
                    ms = await one(session, url, body, headers)
                except (aiohttp.ClientError, RuntimeError, TimeoutError):
                    errors += 1
                    continue
                if time.perf_counter() <= deadline:
                    latencies[kind].append(ms)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        # Throughput counts what finished within the round; the stragglers drain after it.
    return {"latencies": latencies, "errors": errors, "seconds": seconds}


# --- reporting -----------------------------------------------------------------------------


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def flat(rounds: list[dict[str, Any]], kind: str | None = None) -> list[float]:
    return [ms for r in rounds for k, v in r["latencies"].items() if kind in (None, k) for ms in v]


def rate(rounds: list[dict[str, Any]]) -> float:
    return len(flat(rounds)) / sum(r["seconds"] for r in rounds)


def round_load(server: Server, idle: Server | None, args: argparse.Namespace, loop: asyncio.AbstractEventLoop) -> dict:
    time.sleep(args.pause)  # let the previous round's stragglers and records settle
    cpu, idle_cpu = server.cpu_s(), idle.cpu_s() if idle else 0.0
    got = loop.run_until_complete(load(server.url, args.seconds, args.concurrency, args.max_tokens))
    got["cpu"] = server.cpu_s() - cpu
    got["idle_cpu"] = (idle.cpu_s() - idle_cpu) if idle else 0.0
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="load rounds per server (default %(default)s)")
    parser.add_argument("--seconds", type=float, default=20, help="seconds of load per round (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens generated per request (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=10, help="seconds of unmeasured load per server first")
    parser.add_argument("--pause", type=float, default=2.5, help="seconds between rounds (default %(default)s)")
    parser.add_argument("--alone-rounds", type=int, default=2, help="plain rounds with the other server stopped")
    parser.add_argument("--model", type=Path, help="a model directory (default: build the tiny one)")
    eager = "both servers without torch.compile (--enforce-eager): ~30 s less a start, for a short run"
    parser.add_argument("--eager", action="store_true", help=eager)
    parser.add_argument("--sink-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sink_server:
        serve_sink(args.sink_server)
        return

    from collectors.httpserve import new_event_loop

    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmpdir:
        tmp = Path(tmpdir)
        model = args.model
        if model is None:
            from devtools.tiny_model import build_tiny_model

            model = build_tiny_model(tmp / "tiny-llama")
        sink_port = free_port()
        sink_url = f"http://127.0.0.1:{sink_port}"
        sink = subprocess.Popen([sys.executable, __file__, "--sink-server", str(sink_port)])
        flags = [*VLLM_FLAGS, *(["--enforce-eager"] if args.eager else [])]
        plain, instrumented = servers(tmp, model, sink_url, flags)
        loop = new_event_loop()
        try:
            for server in (plain, instrumented):  # one at a time: start-up takes both cores
                server.start()
                loop.run_until_complete(load(server.url, args.warmup, args.concurrency, args.max_tokens))
            built0, records0 = (
                instrumented.metric("costplatform_serving_record_build_seconds_total"),
                instrumented.metric("costplatform_serving_records_total"),
            )
            results: dict[str, list[dict[str, Any]]] = {"plain": [], "instrumented": []}
            for r in range(args.rounds):
                order = (plain, instrumented) if r % 2 == 0 else (instrumented, plain)
                for server in order:
                    other = instrumented if server is plain else plain
                    results[server.name].append(round_load(server, other, args, loop))
            time.sleep(args.pause + 2)
            built = instrumented.metric("costplatform_serving_record_build_seconds_total") - built0
            recorded = instrumented.metric("costplatform_serving_records_total") - records0
            record_errors = instrumented.metric("costplatform_serving_record_errors_total")
            instrumented.stop()  # the spool keeps what the shipper has not sent
            shipped = json.loads(urllib.request.urlopen(sink_url, timeout=5).read())["accepted"]
            alone = [round_load(plain, None, args, loop) for _ in range(args.alone_rounds)]
            loop.close()
            report(args, results, alone, built, recorded, record_errors, shipped)
        finally:
            for server in (plain, instrumented):
                server.stop()
            sink.terminate()
            sink.wait(10)


def report(
    args: argparse.Namespace,
    results: dict[str, list[dict[str, Any]]],
    alone: list[dict[str, Any]],
    built: float,
    recorded: float,
    record_errors: float,
    shipped: int,
) -> None:
    import vllm

    p, i = results["plain"], results["instrumented"]
    engine = "CPU, eager" if args.eager else "CPU"
    print(
        f"vLLM {vllm.__version__} ({engine}), python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"{args.rounds} rounds x {args.seconds:g} s per server, ABBA order, concurrency {args.concurrency}, "
        f"max_tokens {args.max_tokens} (ignore_eos); mix 50% chat / 25% json_object / 25% stream; ms"
    )
    print()
    print("| server | requests | errors | req/s | p50 | p99 | server CPU ms / request | idle other server CPU ms / s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rounds in (("plain", p), ("instrumented", i), ("plain, alone", alone)):
        if not rounds:
            continue
        n = len(flat(rounds))
        cpu = sum(r["cpu"] for r in rounds) / max(n, 1) * 1000
        secs = sum(r["seconds"] for r in rounds)
        idle = f"{sum(r['idle_cpu'] for r in rounds) / secs * 1000:.1f}" if name != "plain, alone" else "-"
        errors = sum(r["errors"] for r in rounds)
        p50, p99 = pct(flat(rounds), 50), pct(flat(rounds), 99)
        print(f"| {name} | {n} | {errors} | {rate(rounds):.2f} | {p50:.1f} | {p99:.1f} | {cpu:.1f} | {idle} |")
    print()
    print("| kind | plain p50 / p99 | instrumented p50 / p99 | added p50 / p99 |")
    print("|---|---|---|---|")
    for kind in ("chat", "json", "stream"):
        a, b = flat(p, kind), flat(i, kind)
        print(
            f"| {kind} | {pct(a, 50):.1f} / {pct(a, 99):.1f} | {pct(b, 50):.1f} / {pct(b, 99):.1f} "
            f"| {pct(b, 50) - pct(a, 50):+.1f} / {pct(b, 99) - pct(a, 99):+.1f} |"
        )
    ratio = rate(i) / rate(p) if rate(p) else float("nan")  # a short round may finish nothing
    pair_ratios = [len(flat([b])) / max(len(flat([a])), 1) for a, b in zip(p, i, strict=True)]
    added50 = pct(flat(i), 50) - pct(flat(p), 50)
    added99 = pct(flat(i), 99) - pct(flat(p), 99)
    pair_added = [pct(flat([b]), 50) - pct(flat([a]), 50) for a, b in zip(p, i, strict=True)]
    print()
    print("| measure | value | target |")
    print("|---|---|---|")
    print(
        f"| throughput ratio instrumented / plain | **{ratio:.3f}** (per round pair: median "
        f"{statistics.median(pair_ratios):.3f}, min {min(pair_ratios):.3f}, max {max(pair_ratios):.3f}) "
        f"| >= 0.98 {'met' if ratio >= 0.98 else 'MISSED'} |"
    )
    print(
        f"| added latency p50 | **{added50:+.2f} ms** (per round pair: median {statistics.median(pair_added):+.2f}, "
        f"min {min(pair_added):+.2f}, max {max(pair_added):+.2f}) | <= 1 ms {'met' if added50 <= 1 else 'MISSED'} |"
    )
    print(f"| added latency p99 | {added99:+.2f} ms | - |")
    print(
        f"| emitter CPU per record (record_build_seconds / records) | "
        f"{built / max(recorded, 1) * 1000:.3f} ms ({recorded:.0f} records, {record_errors:.0f} build errors) | - |"
    )
    cpu_p = sum(r["cpu"] for r in p) / max(len(flat(p)), 1) * 1000
    cpu_i = sum(r["cpu"] for r in i) / max(len(flat(i)), 1) * 1000
    print(f"| added server CPU per request (whole process tree) | {cpu_i - cpu_p:+.2f} ms | - |")
    print(f"| records shipped to the sink (all measured and warm-up requests) | {shipped} | - |")
    if alone:
        print(
            f"| plain alone / plain with the idle instrumented server up (req/s) | {rate(alone) / rate(p):.3f} | ~1 |"
        )


if __name__ == "__main__":
    main()
