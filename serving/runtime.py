"""Where the engine's counts meet the HTTP request, inside the vLLM server process.

The stat logger (serving.plugin) and the engine hooks (serving.hooks) report what the
engine counted for a request id; the middleware (serving.middleware) reports what it saw
of the request: headers, body, status, the response, the disconnect. `Join` pairs them by
request id on the event loop without blocking it; `Emitter` builds the record on a
thread of its own (tokenizing segments costs CPU) and hands it to the shipper's spool.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter

from serving.config import ServingConfig
from wire import genai_metrics
from wire import record as rec
from wire.attribution import Policy
from wire.budgets import BudgetGate, default_hold, polling_gate
from wire.edge import Door, Exchange, RecordObserver, Sizer, exchange_record, hand_on, observers
from wire.edge import sizer as edge_sizer
from wire.reservations import Reservations

log = logging.getLogger("costplatform.serving")

# Tokens put into records, per model: the reconciler (collectors.vllm_metrics) compares
# them with vLLM's own counters in the same /metrics scrape.
ACCOUNTED_PROMPT = Counter(
    "costplatform_serving_accounted_prompt_tokens", "Prompt tokens put into records", ["model_name"]
)
ACCOUNTED_GENERATION = Counter(
    "costplatform_serving_accounted_generation_tokens", "Generated tokens put into records", ["model_name"]
)
ACCOUNTED_CACHED = Counter(
    "costplatform_serving_accounted_cached_tokens", "Cached prompt tokens put into records", ["model_name"]
)
# Speculative drafts put into records (the engine's per-request figures): what vLLM's spec_decode
# counters hold beyond these belongs to requests without them (aborted ones), and is reconciled.
ACCOUNTED_DRAFT = Counter(
    "costplatform_serving_accounted_draft_tokens", "Speculative draft tokens put into records", ["model_name"]
)
ACCOUNTED_DRAFT_ACCEPTED = Counter(
    "costplatform_serving_accounted_draft_accepted_tokens", "Accepted draft tokens put into records", ["model_name"]
)
RECORDS = Counter("costplatform_serving_records", "Records handed to the spool", ["status"])
BUILD_ERRORS = Counter("costplatform_serving_record_errors", "Requests whose record could not be built")
# CPU the emitter thread spends building records (tokenizing segments included): the
# instrumentation's own cost per request is this over costplatform_serving_records_total.
BUILD_SECONDS = Counter("costplatform_serving_record_build_seconds", "CPU seconds of the thread building records")


@dataclass
class EngineCounts:
    """What the engine counted for one sequence (one request, or one child of n > 1)."""

    request_id: str
    model: str
    prompt: int
    cached: int
    completion: int
    finish_reason: str | None
    preemptions: int = 0
    queued_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    e2e_s: float | None = None
    aborted: bool = False
    draft: int = 0
    draft_accepted: int = 0


@dataclass
class Seen(Exchange):
    """What the middleware saw of one HTTP request and its answer (its record_id is the engine's
    request id)."""

    request_id: str = ""  # X-Request-Id
    status: int | None = None
    response: bytearray = field(default_factory=bytearray)
    first_byte: float | None = None
    end: float | None = None
    disconnected: bool = False
    error: str | None = None
    streamed: bool = False


class Waiter:
    def __init__(self, key: str, expected: int, loop: asyncio.AbstractEventLoop) -> None:
        self.key = key
        self.expected = expected
        self.loop = loop
        self.counts: list[EngineCounts] = []
        self.event = asyncio.Event()

    def add(self, counts: EngineCounts) -> None:
        self.counts.append(counts)
        if len(self.counts) >= self.expected:
            self.loop.call_soon_threadsafe(self.event.set)


_SUFFIX = re.compile(r"[-_]\d+$")


def _candidates(engine_id: str) -> list[str]:
    """Keys a middleware may have registered for an engine request id: `chatcmpl-<id>`,
    `cmpl-<id>-<i>` for the i-th prompt of a completion, `<id>` itself."""
    out = [engine_id]
    base = _SUFFIX.sub("", engine_id)
    if base != engine_id:
        out.append(base)
    return out


class Join:
    """Counts by request id, for the requests a middleware is waiting on; the others
    (no middleware, or a route it does not watch) go straight to `unclaimed`."""

    def __init__(self, unclaimed: Any, *, accounted: bool = True) -> None:
        self._waiting: dict[str, Waiter] = {}
        self._spec: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._unclaimed = unclaimed
        self.hooks_installed = False

    def expect(self, key: str, expected: int = 1) -> Waiter:
        waiter = Waiter(key, max(expected, 1), asyncio.get_running_loop())
        with self._lock:
            self._waiting[key] = waiter
        return waiter

    def release(self, key: str) -> None:
        with self._lock:
            self._waiting.pop(key, None)

    def spec_decode(self, engine_id: str, draft: int, accepted: int) -> None:
        """Speculative-decoding counts, known to the engine hook just before the request's
        finished stats reach the stat logger."""
        with self._lock:
            self._spec[engine_id] = (draft, accepted)
            while len(self._spec) > 10_000:
                self._spec.popitem(last=False)

    def report(self, counts: EngineCounts) -> None:
        with self._lock:
            spec = self._spec.pop(counts.request_id, None)
            if spec:
                counts.draft, counts.draft_accepted = spec
            waiter = next((self._waiting[k] for k in _candidates(counts.request_id) if k in self._waiting), None)
        _account(counts)
        if waiter is not None:
            waiter.add(counts)
        else:
            self._unclaimed(counts)


def _account(counts: EngineCounts) -> None:
    ACCOUNTED_PROMPT.labels(counts.model).inc(counts.prompt)
    ACCOUNTED_GENERATION.labels(counts.model).inc(counts.completion)
    ACCOUNTED_CACHED.labels(counts.model).inc(counts.cached)
    ACCOUNTED_DRAFT.labels(counts.model).inc(counts.draft)
    ACCOUNTED_DRAFT_ACCEPTED.labels(counts.model).inc(counts.draft_accepted)


# --- building records ----------------------------------------------------------------------

_REJECTED_HTTP = {429, 503}
_TIMEOUT_HTTP = {408, 504}


def outcome(seen: Seen | None, counts: list[EngineCounts]) -> tuple[str, str | None]:
    """(status, finish_reason) of a request."""
    reasons = [c.finish_reason for c in counts]
    if any(c.aborted for c in counts) or (seen is not None and seen.disconnected and "abort" in reasons):
        return "aborted", "abort"
    if seen is not None and seen.disconnected and not counts:
        return "aborted", "abort"
    if "error" in reasons:
        return "error", "error"
    if seen is not None and seen.status is not None and seen.status >= 400:
        if seen.status in _REJECTED_HTTP:
            return "rejected", None
        if seen.status in _TIMEOUT_HTTP:
            return "timeout", None
        return "error", "error"
    if seen is not None and seen.error is not None:
        return "error", "error"
    if "abort" in reasons:
        return "aborted", "abort"
    for reason in ("length", "repetition", "stop"):
        if reason in reasons:
            return "ok", reason
    return "ok", None


def _sum_counts(counts: list[EngineCounts]) -> dict[str, int]:
    """n > 1 children share the prompt: it was computed once and the children read it from
    the cache, so the prompt is the largest child's; completions add up."""
    if not counts:
        return {"prompt": 0, "completion": 0}
    prompt = max(c.prompt for c in counts)
    cached = max(c.cached for c in counts)
    return {
        "prompt": prompt,
        "prompt_cached": cached,
        "completion": sum(c.completion for c in counts),
        "draft": sum(c.draft for c in counts),
        "draft_accepted": sum(c.draft_accepted for c in counts),
        # vLLM recomputes a preempted request's KV from scratch (less what the prefix cache still holds).
        "recomputed": sum(c.preemptions * max(c.prompt - c.cached, 0) for c in counts),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None or seconds < 0 else seconds * 1000.0


class Emitter:
    """A thread that turns joined requests into records and submits them to the pipeline, then
    shows each to the observers (wire.edge.hand_on, as every edge does)."""

    def __init__(
        self,
        config: ServingConfig,
        pipeline: Any,
        *,
        served_model: str | None = None,
        observers: Sequence[RecordObserver] = (),
    ) -> None:
        self.config = config
        self.pipeline = pipeline
        self.served_model = served_model
        self.observers = list(observers)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._tokenizer: Any = None
        self._tokenizer_failed = False
        self._thread = threading.Thread(target=self._run, name="costplatform-records", daemon=True)
        self._thread.start()

    def submit(self, seen: Seen | None, counts: list[EngineCounts]) -> None:
        self._queue.put((seen, counts))

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def tokenizer(self) -> Any:
        if self._tokenizer is None and not self._tokenizer_failed and self.config.tokenizer and self.config.segments:
            try:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.config.tokenizer)
            except Exception:
                log.exception("cannot load the tokenizer %s: system/tool/structural counts off", self.config.tokenizer)
                self._tokenizer_failed = True
        return self._tokenizer

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            began = time.thread_time()
            try:
                record = self.build(*item)
            except Exception:
                BUILD_ERRORS.inc()
                log.exception("record not built for %s", item[0].request_id if item[0] else item[1])
                continue
            finally:
                BUILD_SECONDS.inc(time.thread_time() - began)
            RECORDS.labels(record["outcome"]["status"]).inc()
            hand_on(record, self.pipeline, self.observers, self.served_model)

    def build(self, seen: Seen | None, counts: list[EngineCounts]) -> dict[str, Any]:
        status, finish_reason = outcome(seen, counts)
        tokens = _sum_counts(counts)
        first = counts[0] if counts else None
        if seen is None:  # the engine's counts of a request no middleware watched
            assert first is not None
            return rec.make_record(
                record_id=first.request_id,
                ts=datetime.fromtimestamp(time.time() - (first.e2e_s or 0.0), UTC),
                model=first.model,
                tokens=tokens,
                status=status,
                finish_reason=finish_reason,
                model_version=self.config.model_version,
                dims=self.config.dims,
                timing={"queued": _ms(first.queued_s), "prefill": _ms(first.prefill_s), "e2e": _ms(first.e2e_s)},
            )
        body = seen.body if isinstance(seen.body, dict) else {}
        response = parse_response(seen)
        if response.get("finish_reason") == "tool_calls" and status == "ok":
            finish_reason = "tool_calls"
        tokenizer = self.tokenizer()
        if not counts and response.get("usage"):
            tokens.update(rec.usage_tokens(response["usage"]))
        tokens["reasoning"] = reasoning_tokens(response, tokenizer)
        ttft = _ms(seen.first_byte - seen.arrival) if seen.streamed and seen.first_byte else None
        if ttft is None and first is not None and first.queued_s is not None and first.prefill_s is not None:
            ttft = _ms(first.queued_s + first.prefill_s)
        end = seen.end or time.time()
        return exchange_record(
            seen,
            model=str(body.get("model") or (first.model if first else self.served_model) or "unknown"),
            tokens=tokens,
            status=status,
            finish_reason=finish_reason,
            timing={
                "queued": _ms(first.queued_s) if first else None,
                "ttft": ttft,
                "prefill": _ms(first.prefill_s) if first else None,
                "decode": _ms(first.decode_s) if first else None,
                "e2e": _ms(end - seen.arrival),
            },
            text=response.get("text", ""),
            tokenizer=tokenizer,
            hash_key=self.config.hash_key,
            model_version=self.config.model_version,
        )


def reasoning_tokens(response: dict[str, Any], tokenizer: Any) -> int:
    """Tokens the model spent reasoning, when vLLM runs a reasoning parser: the usage's
    completion_tokens_details.reasoning_tokens (vLLM's own count from the parser, in every
    non-streamed answer and in a stream's usage chunk), else the reasoning text the answer
    carried, re-tokenized (a stream whose client did not ask for usage)."""
    counted = rec.usage_reasoning_tokens(response.get("usage"))
    if counted or tokenizer is None or not response.get("reasoning"):
        return counted
    return len(tokenizer(response["reasoning"], add_special_tokens=False)["input_ids"])


def parse_response(seen: Seen) -> dict[str, Any]:
    """The generated text, reasoning text, finish reason and usage of a JSON or SSE response
    body. vLLM 0.32 names the reasoning `reasoning` (message or delta); older versions and
    other servers `reasoning_content`."""
    import json

    raw = bytes(seen.response)
    out: dict[str, Any] = {}
    if not raw:
        return out
    documents: list[Any] = []
    if seen.streamed:
        for line in raw.split(b"\n"):
            line = line.strip()
            if line.startswith(b"data:"):
                data = line[5:].strip()
                if data and data != b"[DONE]":
                    try:
                        documents.append(json.loads(data))
                    except ValueError:
                        continue
    else:
        try:
            documents.append(json.loads(raw))
        except ValueError:
            return out
    text: list[str] = []
    thought: list[str] = []
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        if doc.get("usage"):
            out["usage"] = doc["usage"]
        for choice in doc.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            part = choice.get("delta") or choice.get("message") or {}
            content = part.get("content") if isinstance(part, dict) else None
            if isinstance(content, str):
                text.append(content)
            elif isinstance(choice.get("text"), str):
                text.append(choice["text"])
            reasoning = (part.get("reasoning") or part.get("reasoning_content")) if isinstance(part, dict) else None
            if isinstance(reasoning, str):
                thought.append(reasoning)
            if choice.get("finish_reason"):
                out["finish_reason"] = choice["finish_reason"]
    out["text"] = "".join(text)
    if thought:
        out["reasoning"] = "".join(thought)
    return out


# --- the process-wide instance ---------------------------------------------------------------


class Runtime:
    def __init__(self, config: ServingConfig) -> None:
        from wire.shipper import Pipeline

        self.config = config
        self.policy = Policy(config.attribution_map, config.dims)
        self.pipeline = Pipeline(config.spool_dir, url=config.platform_url, key=config.collector_key).start()
        self.token_metrics = genai_metrics.TokenMetrics.from_env()
        self.emitter = Emitter(config, self.pipeline, observers=observers(metrics=self.token_metrics))
        self.join = Join(lambda counts: self.emitter.submit(None, [counts]))
        self.middleware_active = False
        self.served_model: str | None = None
        self.budgets = budget_gate(config)
        if self.budgets is not None and self.budgets.reserves:
            # A reservation is settled once its record is in the pipeline (the record's thread),
            # and its hold cut short once the platform has stored the record (the shipper's).
            self.emitter.observers += observers(budgets=self.budgets)
            self.pipeline.on_acked = self.budgets.acked
        self.door = Door(self.policy, budgets=self.budgets, size=sizer(config))
        self._tasks: set[asyncio.Task[Any]] = set()

    def finish_later(self, seen: Seen, waiter: Waiter, *, wait: float) -> None:
        """Wait (off the request's own task, which may be cancelled) for the engine's counts,
        then hand the pair to the emitter."""
        task = asyncio.get_running_loop().create_task(self._finish(seen, waiter, wait))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, seen: Seen, waiter: Waiter, wait: float) -> None:
        try:
            if wait > 0 and len(waiter.counts) < waiter.expected:
                try:
                    await asyncio.wait_for(waiter.event.wait(), wait)
                except TimeoutError:
                    pass
        finally:
            self.join.release(waiter.key)
            self.emitter.submit(seen, list(waiter.counts))


def budget_gate(config: ServingConfig) -> BudgetGate | None:
    """The hard-budget gate of this server (started), or None when budgets are not held here;
    with config.budget_reserve it reserves in that Redis (wire/reservations.py)."""
    if not config.budget_poll:
        return None
    reservations = None
    if config.budget_reserve:
        hold = config.budget_hold if config.budget_hold is not None else default_hold(config.budget_poll)
        reservations = Reservations.from_url(config.budget_reserve, ttl=config.budget_ttl, hold=hold)
    return polling_gate(
        config.platform_url,
        config.collector_key,
        interval=config.budget_poll,
        fail_closed=config.budget_fail_closed,
        stale=config.budget_stale,
        reservations=reservations,
    )


def sizer(config: ServingConfig) -> Sizer:
    """A request's largest use: its prompt counted with the served model's tokenizer (as the
    engine counts it), its max_tokens or config.budget_max_tokens."""
    return edge_sizer(default_max=config.budget_max_tokens, prompt_tokens=_prompt_counter(config.tokenizer))


def _prompt_counter(name: str | None) -> Callable[[Mapping[str, Any]], int]:
    """Prompt tokens with a tokenizer of its own, loaded on first use and used by one thread at a
    time (a fast tokenizer is not to be shared between threads); 0 without one."""
    lock = threading.Lock()
    loaded: list[Any] = []

    def count(body: Mapping[str, Any]) -> int:
        with lock:
            if not loaded:
                loaded.append(_load_tokenizer(name))
            return rec.prompt_tokens(body, loaded[0]) if loaded[0] is not None else 0

    return count


def _load_tokenizer(name: str | None) -> Any:
    if not name:
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name)
    except Exception:
        log.exception("cannot load the tokenizer %s: prompts reserved by their bytes", name)
        return None


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get() -> Runtime | None:
    """The process's runtime, created on first use; None when the platform is not configured."""
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                config = ServingConfig.from_env()
                if config is None:
                    return None
                _runtime = Runtime(config)
    return _runtime
