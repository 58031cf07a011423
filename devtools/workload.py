"""A realistic request mix for an OpenAI-compatible server (the instrumented vLLM of `make run`),
over HTTP only. Each app sends its own API key (`Authorization: Bearer demo-<team>-key`) and its
X-Costplatform-* headers; `attribution_map()` is the map that bills each key to its app's line
and team (the server's --attribution-map), so the headers only add descriptive dims:

- customer-service FAQ bot: a long system prompt before every short question (prefix cache);
- search RAG app: a retrieval tool call and its long result in the prompt, answers capped low
  so some are cut at max_tokens;
- customer-service agent: plan/retrieve/reason/tool steps of one conversation; now and then
  it loops, sending the same three prompts again and again;
- a forgotten batch job (data-platform, env=staging): the same request every few seconds;
- a retry storm (payments) in the second fifth: the client gives up after the first streamed
  chunk (the server records an aborted request) and retries with X-Costplatform-Attempt and
  X-Costplatform-Retry-Of;
- a campaign window (marketing) in the fourth fifth: copywriting traffic jumps.

    python -m devtools.workload --url http://127.0.0.1:8001 --seconds 180

The tiny random model rarely ends an answer by itself: requests pass `stop_token_ids` (a
slice of its vocabulary) so answers end after some dozens of tokens with finish_reason stop,
as a real model's would.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

MODEL = "tiny-llama"
WORDS = (
    "the customer order refund invoice shipping account please help question answer policy return delivery "
    "price product service support ticket status update search document context retrieve plan reason step"
).split()
# Answers stop when one of these ids is sampled (about 1 in 40 tokens of the tiny model's 1,024).
STOP_IDS = list(range(300, 326))
PHASES = (  # (until this share of the run, name)
    (0.4, "steady"),
    (0.6, "retry storm"),
    (0.75, "steady"),
    (0.9, "campaign"),
    (1.0, "steady"),
)


def phase_at(share: float) -> str:
    return next((name for until, name in PHASES if share < until), PHASES[-1][1])


def phase_span(name: str) -> tuple[float, float]:
    """The first span of the run (as shares of it) in phase `name`."""
    start = 0.0
    for until, phase in PHASES:
        if phase == name:
            return start, until
        start = until
    raise KeyError(name)


# The apps of the mix by team: (business line, team). Each has its own API key.
APPS = {
    "cs-bot": "customer-service",
    "search-web": "search",
    "risk": "payments",
    "growth": "marketing",
    "etl": "data-platform",
}


def app_key(team: str) -> str:
    return f"demo-{team}-key"


def attribution_map() -> str:
    """The attribution map (TOML) of the mix: each app's key pays for its own line and team."""
    lines = ["# The apps of devtools/workload.py: each key is billed to its app's line and team."]
    for team, line in APPS.items():
        lines += [f"[callers.{team}]", f'tokens = ["{app_key(team)}"]']
        lines += [f'dims = {{ business_line = "{line}", team = "{team}" }}', ""]
    return "\n".join(lines)


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


SYSTEM_PROMPT = "You are the support assistant of the shop. " + text(random.Random(1), 900)
COPY_PROMPT = "You write short, friendly marketing copy for the shop's campaign. " + text(random.Random(2), 300)
AGENT_PROMPT = "You are an agent. Think step by step and call tools. " + text(random.Random(3), 250)


@dataclass
class Stats:
    """Counts the run has seen, by scenario and by outcome (thread-safe)."""

    requests: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    prompt: int = 0
    completion: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, scenario: str, outcome: str, usage: dict[str, Any] | None = None) -> None:
        with self.lock:
            self.requests[scenario] += 1
            self.outcomes[outcome] += 1
            if usage:
                self.prompt += int(usage.get("prompt_tokens") or 0)
                self.completion += int(usage.get("completion_tokens") or 0)

    def line(self) -> str:
        with self.lock:
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
            total = sum(self.requests.values())
            return f"{total} requests ({outcomes}); tokens {self.prompt:,} in, {self.completion:,} out"


class Client:
    """POST /v1/chat/completions with attribution headers; aborts a stream on request."""

    def __init__(self, url: str, stats: Stats, timeout: float = 60) -> None:
        self.url = url.rstrip("/") + "/v1/chat/completions"
        self.stats = stats
        self.timeout = timeout

    def chat(
        self,
        scenario: str,
        messages: list[dict[str, Any]],
        dims: dict[str, str],
        *,
        max_tokens: int = 96,
        abort: bool = False,
        attempt: int = 1,
        retry_of: str = "",
    ) -> str:
        """Send one request; returns its record id (chatcmpl-<X-Request-Id>)."""
        request_id = uuid.uuid4().hex
        headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
        headers["Authorization"] = f"Bearer {app_key(dims['team'])}"
        headers |= {"X-Costplatform-" + k.replace("_", "-").title(): v for k, v in dims.items()}
        if attempt > 1:
            headers |= {"X-Costplatform-Attempt": str(attempt), "X-Costplatform-Retry-Of": retry_of}
        body: dict[str, Any] = {"model": MODEL, "messages": messages, "max_tokens": max_tokens}
        body["stop_token_ids"] = STOP_IDS
        if abort:
            body |= {"stream": True, "max_tokens": 400, "stop_token_ids": []}
        request = urllib.request.Request(self.url, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                if abort:
                    response.readline()  # the first chunk, then hang up: the server aborts the request
                    self.stats.add(scenario, "aborted by the client")
                else:
                    answer = json.loads(response.read())
                    finish = answer["choices"][0].get("finish_reason") or "?"
                    self.stats.add(scenario, finish, answer.get("usage"))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self.stats.add(scenario, f"failed ({type(exc).__name__})")
        return f"chatcmpl-{request_id}"


def faq_bot(client: Client, rng: random.Random) -> None:
    question = f"Where is my order A-{rng.randrange(1000, 9999)}? " + text(rng, rng.randrange(8, 30))
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
    dims = {"business_line": "customer-service", "team": "cs-bot", "feature": "faq-bot", "env": "demo"}
    client.chat("customer-service bot", messages, dims)


def rag(client: Client, rng: random.Random) -> None:
    context = json.dumps([{"doc": f"kb-{rng.randrange(500)}", "text": text(rng, 120)} for _ in range(4)])
    call = {"id": "call_1", "type": "function", "function": {"name": "search_kb", "arguments": '{"q": "refund"}'}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the retrieved documents only."},
        {"role": "user", "content": text(rng, 15) + "?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": context},
    ]
    dims = {"business_line": "search", "team": "search-web", "feature": "rag-qa", "env": "demo"}
    client.chat("RAG app", messages, dims, max_tokens=rng.choice((24, 48, 96)))


def agent(client: Client, rng: random.Random) -> None:
    conversation = f"agent-{uuid.uuid4().hex[:10]}"
    looping = rng.random() < 0.3
    task = text(rng, 20)
    for call in range(12 if looping else 4):
        step = ("plan", "retrieve", "reason", "tool")[call % 4]
        # A looping agent asks the same three things over and over (the same prompt hashes).
        note = f"step {call % 3}" if looping else f"step {call}: {text(rng, 10)}"
        messages = [{"role": "system", "content": AGENT_PROMPT}, {"role": "user", "content": f"{task}. {note}"}]
        dims = {"business_line": "customer-service", "team": "cs-bot", "feature": "agent", "env": "demo"}
        client.chat(
            "looping agent" if looping else "agent", messages, dims | {"step": step, "conversation_id": conversation}
        )


def retry_storm(client: Client, rng: random.Random) -> None:
    messages = [{"role": "user", "content": f"Risk check for payment P-{rng.randrange(10**6)}: " + text(rng, 60)}]
    dims = {"business_line": "payments", "team": "risk", "feature": "risk-check", "env": "demo"}
    failed = ""
    for attempt in range(1, 4):
        last = attempt == 3 or rng.random() < 0.3
        failed = client.chat("retry storm", messages, dims, abort=not last, attempt=attempt, retry_of=failed)
        if last:
            return


def campaign(client: Client, rng: random.Random) -> None:
    messages = [{"role": "system", "content": COPY_PROMPT}, {"role": "user", "content": "Write: " + text(rng, 12)}]
    dims = {"business_line": "marketing", "team": "growth", "feature": "copywriter", "env": "demo"}
    client.chat("campaign", messages, dims, max_tokens=128)


def batch_job(client: Client, rng: random.Random) -> None:
    messages = [{"role": "user", "content": "Summarise yesterday's load report. " + text(random.Random(4), 200)}]
    dims = {"business_line": "data-platform", "team": "etl", "feature": "nightly-summary", "env": "staging"}
    client.chat("forgotten batch job", messages, dims, max_tokens=64)


Scenario = Callable[[Client, random.Random], None]
MIX: dict[str, list[tuple[Scenario, int]]] = {
    "steady": [(faq_bot, 5), (rag, 3), (agent, 1), (campaign, 1)],
    "retry storm": [(faq_bot, 2), (rag, 1), (retry_storm, 6)],
    "campaign": [(faq_bot, 2), (rag, 1), (campaign, 8)],
}


def run(
    url: str,
    *,
    seconds: float,
    concurrency: int = 4,
    seed: int = 7,
    batch_every: float = 3.0,
    progress: Callable[[str], None] = print,
    every: float = 10.0,
) -> Stats:
    """Drive the mix for `seconds` with `concurrency` clients plus the batch job; report
    progress every `every` seconds. Returns what was sent and how it ended."""
    stats = Stats()
    client = Client(url, stats)
    started = time.monotonic()
    deadline = started + seconds
    stop = threading.Event()  # set on Ctrl-C: the clients finish their request and return

    def going() -> bool:
        return time.monotonic() < deadline and not stop.is_set()

    def share() -> float:
        return min((time.monotonic() - started) / seconds, 1.0)

    def worker(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        while going():
            scenarios, weights = zip(*MIX[phase_at(share())], strict=True)
            rng.choices(scenarios, weights)[0](client, rng)

    def batch() -> None:
        rng = random.Random(seed)
        while going():
            batch_job(client, rng)
            stop.wait(batch_every)

    with ThreadPoolExecutor(concurrency + 1) as pool:
        futures = [pool.submit(worker, n) for n in range(concurrency)] + [pool.submit(batch)]
        try:
            while wait(futures, timeout=every).not_done:
                elapsed = time.monotonic() - started
                progress(f"{min(elapsed, seconds):4.0f}/{seconds:.0f} s  {phase_at(share()):<11}  {stats.line()}")
        except BaseException:
            stop.set()
            raise
        for future in futures:
            future.result()
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.workload", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="base URL of the OpenAI-compatible server")
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    stats = run(args.url, seconds=args.seconds, concurrency=args.concurrency, seed=args.seed)
    print(f"done: {stats.line()}")
    for scenario, count in sorted(stats.requests.items()):
        print(f"  {count:>6}  {scenario}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
