"""A generated month of token records for demos: `make demo-data`, `manage.py demo_data`.

Six business lines with the workloads the seeds describe — a customer-service bot with a long
(cached) system prompt, chats that users abandon, an agent that sometimes loops, a RAG app with
truncated answers, search autocomplete asked again within minutes (duplicates), embeddings
with padding, a payments risk check with a retry storm, a forgotten staging batch job that runs
every hour, a marketing copywriter whose traffic jumps in a campaign window — on two
self-hosted models (one priced cost pool, with idle capacity at night) and three hosted ones.

Records go in through the real ingest service (classification at ingest), in time order, then
the month is priced (price book and pool) and accrued into the ledger. Record ids are derived
from the month, the seed and the position, so loading the same month again stores nothing new.

`make demo-data` builds two months of the accounting zone (`demo_build`): the previous one,
with budgets and revenue, closed through the close workflow (`finding_review` of each open
finding and `close_request_submit` by demo-preparer with `close_checklist`,
`close_request_approve` by demo-approver, whose `period_close` runs the month-end checks that
make findings); and the current one so far,
accrued, with budgets, open. A closed month is left as it is on a second run. The six business
lines get cost-centre codes and names. The record count is per whole month: a month in
progress gets its share of the days so far.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import msgspec

from apps.common.buckets import day_of, hour_floor, month_end, month_of, month_start, previous_month

SOURCE = "demo-data"
POOL = "demo-gpu-cluster"
BIG, SMALL = "qwen2.5-72b-instruct", "qwen2.5-7b-instruct"  # self-hosted, in the pool
HOSTED = {  # CNY per million tokens: input, cached input, output
    "deepseek-chat": ("2", "0.5", "8"),
    "claude-haiku": ("7.2", "0.72", "36"),
    "bge-m3": ("0.5", "0.5", "0"),
}
# CNY per million prompt tokens written to the provider's prompt cache (Anthropic-like: 1.25x input).
CACHE_WRITE_PRICES = {"claude-haiku": "9"}
# Beijing office hours (UTC+8) carry most interactive traffic: weight of each UTC hour.
DAY_SHAPE = [8, 10, 10, 9, 8, 9, 10, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 2, 3, 5]
BATCH = 10_000

Record = dict[str, Any]


@dataclass
class Plan:
    """What to generate: the month, how many records, and the window of the campaign."""

    month: date
    records: int
    seed: int = 11
    start: datetime = field(init=False)
    following: datetime = field(init=False)
    end: datetime = field(init=False)

    def __post_init__(self) -> None:
        # The month of the accounting zone (make demo-data keeps the books in Asia/Shanghai).
        self.start, self.following = month_start(self.month), month_end(self.month)
        # The current month stops at the present hour: ingest refuses what lies too far ahead.
        self.end = min(self.following, hour_floor(datetime.now(UTC)))
        if self.end <= self.start + timedelta(hours=1):
            raise ValueError(f"{self.month:%Y-%m} has not begun (or began under an hour ago)")

    @property
    def share(self) -> float:
        """How much of the month the plan covers: 1 for a month that has ended."""
        return (self.end - self.start) / (self.following - self.start)

    @property
    def campaign(self) -> tuple[datetime, datetime]:
        """Two days around the 11th (Singles' Day)."""
        return self.start + timedelta(days=9), self.start + timedelta(days=11)


class Gen:
    """Random but reproducible records of one plan."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.ids = 0
        # Times are drawn over the whole month, whatever part of it has passed: the records up
        # to any hour are the same on every run (a later run adds only the hours since).
        self.span = (plan.following - plan.start).total_seconds()
        self.day_count = max(int(self.span // 86400), 1)

    def hex(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def when(self, *, shaped: bool = True) -> datetime:
        """A time in the plan: office-hours shaped, or uniform."""
        while True:
            if shaped:
                day = self.rng.randrange(self.day_count + 1)
                hour = self.rng.choices(range(24), DAY_SHAPE)[0]
                at = self.plan.start + timedelta(days=day, hours=hour, seconds=self.rng.random() * 3600)
            else:
                at = self.plan.start + timedelta(seconds=self.rng.random() * self.span)
            if at < self.plan.following:
                return at

    def record(
        self, at: datetime, model: str, dims: dict[str, str], *, prompt: int, completion: int, **more: Any
    ) -> Record:
        self.ids += 1
        tokens = {"prompt": prompt, "completion": completion} | more.pop("tokens", {})
        status, finish = more.pop("status", "ok"), more.pop("finish", "stop")
        ttft = 80 + prompt // 40 + self.rng.randrange(60)
        made: Record = {
            "record_id": f"demo-{self.plan.month:%Y%m}-{self.plan.seed}-{self.ids:08d}",
            "ts": at.isoformat(),
            "model": model,
            "model_version": "awq-int4" if model.startswith("qwen") else "",
            "endpoint": more.pop("endpoint", "chat.completions"),
            "dims": dims,
            "tokens": tokens,
            "outcome": {"status": status, "finish_reason": finish},
            "timing": {"queued": self.rng.randrange(5), "ttft": ttft, "e2e": ttft + completion * 25},
            "prompt_hash": more.pop("prompt_hash", None) or self.hex(),
        }
        return made | more


# --- the workloads: each makes about `n` records ------------------------------------------------

CS = {"business_line": "customer-service", "team": "cs-bot", "env": "prod"}
SEARCH = {"business_line": "search", "team": "search-web", "env": "prod"}


def faq_bot(g: Gen, n: int) -> Iterator[Record]:
    """A 2,400-token system prompt before every question, mostly served from the prefix cache;
    speculative decoding on the big model (rejected drafts are shadow tokens)."""
    for _ in range(n):
        completion = g.rng.randrange(80, 260)
        cached = 2400 if g.rng.random() < 0.8 else 0
        draft = completion // 2
        yield g.record(
            g.when(), BIG, CS | {"feature": "faq-bot"}, prompt=2400 + g.rng.randrange(40, 300), completion=completion,
            tokens={"prompt_cached": cached, "system": 2400, "draft": draft, "draft_accepted": int(draft * 0.7)},
        )  # fmt: skip


def chat(g: Gen, n: int) -> Iterator[Record]:
    """Conversations of 2-8 turns whose prompt grows with the history; 4 % abandoned mid-answer."""
    made = 0
    while made < n:
        at, conversation, history = g.when(), f"conv-{g.hex()[:12]}", 300
        for _turn in range(g.rng.randrange(2, 9)):
            history += g.rng.randrange(60, 200)
            completion = g.rng.randrange(60, 400)
            dims = CS | {"feature": "chat", "conversation_id": conversation}
            if g.rng.random() < 0.04:
                extra: dict[str, Any] = {"status": "aborted", "finish": "abort"}
                completion //= 3
            else:
                extra = {}
            cached = history - 200 if _turn else 0
            yield g.record(
                at,
                SMALL,
                dims,
                prompt=history,
                completion=completion,
                tokens={"prompt_cached": cached, "system": 200},
                **extra,
            )
            history += completion
            at += timedelta(seconds=g.rng.randrange(15, 120))
            made += 1


def agent(g: Gen, n: int) -> Iterator[Record]:
    """plan -> retrieve -> reason -> tool chains; one in 30 loops over the same three prompts (its
    repeats are duplicate waste). The reason step thinks first: three quarters of its completion
    is reasoning."""
    steps = ("plan", "retrieve", "reason", "tool")
    made = 0
    while made < n:
        at, conversation = g.when(), f"agent-{g.hex()[:12]}"
        looping = g.rng.random() < 1 / 30
        hashes = [g.hex() for _ in range(3)]
        for call in range(30 if looping else 4):
            step = steps[call % 4]
            dims = CS | {"feature": "agent", "step": step, "conversation_id": conversation}
            completion = g.rng.randrange(40, 200)
            yield g.record(
                at, BIG, dims, prompt=1500 + 100 * (call % 4), completion=completion,
                tokens={"prompt_cached": 600, "system": 600, "tool": 400 if step == "tool" else 0,
                        "structural": completion // 5 if step == "tool" else 0,
                        "reasoning": completion * 3 // 4 if step == "reason" else 0},
                finish="tool_calls" if step in ("plan", "tool") else "stop",
                prompt_hash=hashes[call % 3] if looping else None,
            )  # fmt: skip
            at += timedelta(seconds=g.rng.randrange(2, 10))
            made += 1


def rag(g: Gen, n: int) -> Iterator[Record]:
    """Retrieved context dominates the prompt (tool tokens) and differs per question: the
    provider's prefix cache serves the system prompt only (its own thresholds row, see
    HEALTH_THRESHOLDS); 5 % of answers hit max_tokens."""
    for _ in range(n):
        truncated = g.rng.random() < 0.05
        context = g.rng.randrange(1500, 4000)
        yield g.record(
            g.when(), "deepseek-chat", SEARCH | {"feature": "rag-qa"}, prompt=context + 350,
            completion=1024 if truncated else g.rng.randrange(150, 600),
            tokens={"system": 250, "tool": context, "prompt_cached": 250},
            finish="length" if truncated else "stop",
        )  # fmt: skip


def embeddings(g: Gen, n: int) -> Iterator[Record]:
    """Chunks embedded in padded batches: the padding is waste."""
    for _ in range(n):
        prompt = g.rng.randrange(200, 512)
        yield g.record(
            g.when(), "bge-m3", SEARCH | {"feature": "embed", "step": "retrieve"}, prompt=prompt, completion=0,
            endpoint="embeddings", tokens={"padding": 512 - prompt},
        )  # fmt: skip


def autocomplete(g: Gen, n: int) -> Iterator[Record]:
    """Popular queries asked again within minutes: the repeats are duplicate computation."""
    made = 0
    while made < n:
        at, prompt_hash, prompt = g.when(), g.hex(), g.rng.randrange(150, 400)
        for _ in range(g.rng.randrange(1, 6)):
            yield g.record(
                at,
                SMALL,
                SEARCH | {"feature": "autocomplete"},
                prompt=prompt,
                completion=g.rng.randrange(10, 40),
                prompt_hash=prompt_hash,
            )
            at += timedelta(seconds=g.rng.randrange(5, 120))
            made += 1


def copywriter(g: Gen, n: int) -> Iterator[Record]:
    """Marketing copy on a hosted Anthropic-like model: 70 % of the month's requests fall in the
    campaign window. The 1,200-token brand guide goes first, marked for the provider's prompt
    cache: a request that finds it there reads it, one that does not (3 %) writes it, and the
    write is priced at the cache-write price."""
    start, end = g.plan.campaign
    dims = {"business_line": "marketing", "team": "growth", "feature": "copywriter", "env": "prod"}
    for _ in range(n):
        at = start + (end - start) * g.rng.random() if g.rng.random() < 0.7 else g.when()
        yield g.record(
            at,
            "claude-haiku",
            dims,
            prompt=1200 + g.rng.randrange(200, 600),
            completion=g.rng.randrange(300, 900),
            tokens=_brand_guide(read=g.rng.random() < 0.97),
        )


def _brand_guide(*, read: bool) -> dict[str, int]:
    """The brand guide's tokens in a copywriter prompt: read from the provider's prompt cache, or written to it."""
    return {"system": 1200, "prompt_cached" if read else "prompt_cache_write": 1200}


def forgotten_batch(g: Gen, n: int) -> Iterator[Record]:
    """A staging job someone forgot: the same-sized requests around the clock, every hour. Its
    2,600-token instructions (with examples) are the same every time, so vLLM's prefix cache
    serves them: by its ratios the job is healthy; only the audit's zombie finding shows it."""
    dims = {"business_line": "data-platform", "team": "etl", "feature": "nightly-summary", "env": "staging"}
    step = g.span / max(n, 1)
    for i in range(n):
        at = g.plan.start + timedelta(seconds=i * step + g.rng.random() * min(step, 30))
        yield g.record(
            at, BIG, dims, prompt=g.rng.randrange(3900, 4100), completion=g.rng.randrange(480, 520),
            tokens={"system": 2600, "prompt_cached": 2600},
        )  # fmt: skip


def risk_check(g: Gen, n: int) -> Iterator[Record]:
    """Payments risk checks from a 1,000-token scoring template (served from the prefix cache);
    on one afternoon a flaky dependency makes a retry storm (each failed attempt retried up to 3
    times)."""
    dims = {"business_line": "payments", "team": "risk", "feature": "risk-check", "env": "prod"}
    storm = g.plan.start + timedelta(days=min(14, g.day_count - 1), hours=6)
    made = 0
    while made < n:
        in_storm = g.rng.random() < 0.35
        at = storm + timedelta(seconds=g.rng.random() * 7200) if in_storm else g.when()
        previous = None
        for attempt in range(1, 5 if in_storm else 2):
            failed = in_storm and attempt < 4 and g.rng.random() < 0.7
            extra: dict[str, Any] = {"attempt": attempt}
            if previous:
                extra["retry_of"] = previous
            if failed:
                extra |= {"status": "timeout", "finish": "error"}
            template = {"system": 1000, "prompt_cached": 1000}
            made_record = g.record(
                at, SMALL, dims, prompt=1400, completion=30 if failed else 180, tokens=template, **extra
            )
            yield made_record
            made += 1
            if not failed:
                break
            previous, at = made_record["record_id"], at + timedelta(seconds=2**attempt)


def doc_qa(g: Gen, n: int) -> Iterator[Record]:
    """Contract Q&A on the big model whose retrieved context grows through the month; 12 % of
    answers are cut at max_tokens. The question comes before the contract, so the prefix cache
    serves only the system prompt, also for the next question on the same contract: its cache
    hit rate is the demo's health alert (put the contract first)."""
    dims = {"business_line": "legal", "team": "contracts", "feature": "doc-qa", "env": "prod"}
    for _ in range(n):
        at = g.when()
        day = (at - g.plan.start).days
        truncated = g.rng.random() < 0.12
        context = 2000 + 60 * day
        yield g.record(
            at, BIG, dims, prompt=context + 500, completion=2048 if truncated else g.rng.randrange(200, 800),
            tokens={"tool": context, "system": 300, "prompt_cached": 300}, finish="length" if truncated else "stop",
        )  # fmt: skip


WORKLOADS: list[tuple[str, float, Callable[[Gen, int], Iterator[Record]]]] = [
    ("customer-service/faq-bot", 0.26, faq_bot),
    ("customer-service/chat", 0.16, chat),
    ("customer-service/agent", 0.10, agent),
    ("search/rag-qa", 0.12, rag),
    ("search/embed", 0.06, embeddings),
    ("search/autocomplete", 0.08, autocomplete),
    ("marketing/copywriter", 0.07, copywriter),
    ("data-platform/nightly-summary (forgotten)", 0.03, forgotten_batch),
    ("payments/risk-check", 0.06, risk_check),
    ("legal/doc-qa", 0.06, doc_qa),
]


def generate(plan: Plan) -> tuple[list[Record], dict[str, int], int]:
    """The records of the plan up to its end, in time order, how many each workload made and
    the pool's capacity (sized on the whole month, so the same on every run)."""
    g = Gen(plan)
    month: list[Record] = []
    made: dict[str, int] = {}
    for name, share, workload in WORKLOADS:
        found = [r for r in workload(g, max(int(plan.records * share), 1)) if _before(r, plan.following)]
        month.extend(found)
        made[name] = sum(1 for r in found if _before(r, plan.end))
    month.sort(key=lambda r: r["ts"])
    return [r for r in month if _before(r, plan.end)], made, _pool_capacity(month)


def _before(record: Record, end: datetime) -> bool:
    # A retry or the next turn of a chat can pass the month's end: it belongs to the next month.
    return datetime.fromisoformat(record["ts"]) < end


# --- into the platform ------------------------------------------------------------------------------


@dataclass
class Loaded:
    records: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    workloads: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def configure(plan: Plan, capacity: int) -> list[str]:
    """Prices of the hosted models, the pool of the self-hosted ones, the campaign window: made
    once (kept if they exist), before pricing and accrual read them."""
    from apps.ledger.models import ElasticWindow
    from apps.pricing.models import CostPool
    from apps.pricing.services import cost_pool_create, price_set

    notes = []
    for model, (i, c, o) in HOSTED.items():
        written = {"cache_write": Decimal(CACHE_WRITE_PRICES[model])} if model in CACHE_WRITE_PRICES else {}
        price_set(
            model_pattern=model,
            prices={"input": Decimal(i), "cached_input": Decimal(c), "output": Decimal(o)} | written,
            effective_from=plan.start,
        )
    notes.append(
        f"prices from {plan.start:%Y-%m-%d} for {', '.join(HOSTED)} (CNY per million tokens; "
        f"a cache-write price for {', '.join(CACHE_WRITE_PRICES)})"
    )
    pool = f"{POOL}-{plan.month:%Y-%m}"
    if not CostPool.objects.filter(name=pool).exists():
        cost_pool_create(
            name=pool, gpus=8, cost_per_gpu_hour=Decimal("18"), model_patterns=["qwen2.5-*"],
            capacity=capacity, effective_from=plan.start, effective_to=plan.following,
        )  # fmt: skip
    notes.append(f"cost pool {pool}: 8 GPUs at 18 CNY an hour for qwen2.5-*, sized for the busy hours")
    start, end = plan.campaign
    ElasticWindow.objects.get_or_create(
        business_line="marketing", name=f"campaign {plan.month:%Y-%m}", defaults={"start": start, "end": end}
    )
    notes.append(f"campaign window for marketing {start:%Y-%m-%d} .. {end:%Y-%m-%d} (elastic expense)")
    return notes + health_thresholds_ensure()


# Business lines whose healthy range differs from the seeds' (the health thresholds table, whose
# defaults row the migrations write): (cache hit at least, why).
HEALTH_THRESHOLDS = {
    "search": (Decimal("0.05"), "RAG: the retrieved context differs per question; only the system prompt is cached"),
}


def health_thresholds_ensure() -> list[str]:
    """The lines' own rows of the health thresholds, made once (later edits are kept)."""
    from apps.classification.models import HealthThreshold

    for line, (cache_hit_min, why) in HEALTH_THRESHOLDS.items():
        HealthThreshold.objects.get_or_create(
            business_line=line, defaults={"cache_hit_min": cache_hit_min, "note": why}
        )
    return [
        f"health thresholds of {line}: cache hit at least {m:.0%} ({why})"
        for line, (m, why) in HEALTH_THRESHOLDS.items()
    ]


def _pool_capacity(records: list[Record]) -> int:
    """The compute-weighted tokens of a busy hour (the 90th percentile) plus a tenth: the
    cluster is sized for the office-hours peak and idles at night (the seeds' tidal waste)."""
    hours: dict[str, float] = {}
    for r in records:
        if r["model"].startswith("qwen2.5-"):
            t = r["tokens"]
            cached = t.get("prompt_cached", 0)
            weighted = (t["prompt"] - cached) + 0.1 * cached + 4 * t["completion"]
            hours[r["ts"][:13]] = hours.get(r["ts"][:13], 0) + weighted
    busy = sorted(hours.values()) or [1.0]
    return max(int(busy[int(len(busy) * 0.9)] * 1.1), 1)


def ingest(records: list[Record], *, progress: Callable[[str], None]) -> tuple[int, int, int]:
    """Through the ingest service, in batches of BATCH, as a collector key `demo-data`."""
    from apps.accounts.models import CollectorKey
    from apps.accounts.services import collector_key_create
    from apps.pipeline.records import batch_ingest

    # The month generated is in the past: its key is a backfill key (also one made before keys
    # had limits, which is marked here).
    key = CollectorKey.objects.filter(name=SOURCE).first() or collector_key_create(name=SOURCE, backfill=True).key
    if not key.backfill:
        CollectorKey.objects.filter(pk=key.pk).update(backfill=True)
        key.backfill = True
    encode = msgspec.json.Encoder().encode
    accepted = duplicates = rejected = 0
    started = time.monotonic()
    for i in range(0, len(records), BATCH):
        result = batch_ingest(key=key, body=encode({"records": records[i : i + BATCH]}), ndjson=False)
        accepted, duplicates = accepted + result.accepted, duplicates + result.duplicates
        rejected += len(result.rejected)
        done = min(i + BATCH, len(records))
        if done == len(records) or (i // BATCH) % 5 == 4:
            rate = done / max(time.monotonic() - started, 1e-6)
            progress(f"  ingested {done:,}/{len(records):,} ({rate:,.0f} records/s)")
    return accepted, duplicates, rejected


def price_and_accrue(plan: Plan) -> tuple[int, int]:
    """Price every hour the load touched (dirty hours) and the ended pool-hours; accrue the month."""
    from apps.ledger.services.accrual import range_accrue, recent_accrue
    from apps.pricing.services import dirty_hours_price, hours_price

    hours = 0
    for _ in range(40):
        done = dirty_hours_price(max_days=31)
        hours += done.hours
        if not done.hours:
            break
    # Pool hours with no records still cost their GPUs (idle capacity): price the whole range.
    last = hour_floor(plan.end)
    hours_price(start=plan.start, end=last)
    entries = sum(r.entries_written for r in range_accrue(start=plan.month, end=day_of(plan.end) + timedelta(days=1)))
    # What the beat's recent_accrue would do within five minutes: take in the days pricing
    # marked dirty (booked just now, so skipped by fingerprint) and clear the marks.
    entries += sum(r.entries_written for r in recent_accrue())
    return hours, entries


def plan_for(*, month: date, records: int, seed: int = 11) -> Plan:
    """The plan of a month with `records` per whole month: a month in progress gets those of
    its hours so far."""
    return Plan(month=month, records=records, seed=seed)


# Budget as a multiple of the month's cost: customer-service near 87 % used, marketing over.
BUDGET_FACTORS = {
    "customer-service": "1.15", "search": "2", "marketing": "0.9",
    "data-platform": "1.5", "payments": "1.25", "legal": "1.1",
}  # fmt: skip
REVENUE_FACTORS = {"marketing": 12, "payments": 40}  # marketing's campaign spend passes 3 % of it


def plan_budgets(plan: Plan) -> list[str]:
    """Budgets of every business line against what the month costs (a month in progress: as
    its days so far project) and revenue of marketing, whose campaign spend passes 3 % of it,
    and of payments."""
    from apps.plans.planning import budget_set, revenue_set
    from apps.pricing.selectors import class_usage

    rows = class_usage(
        # One row per line: the plan's records lie before its end, an hour boundary.
        start=plan.start,
        end=plan.end,
        granularity="month",
        group_by=["business_line"],
    )
    whole = Decimal(1) / Decimal(plan.share)
    cost = {row["business_line"]: row["cost"].get("CNY", Decimal(0)) * whole for row in rows}
    notes = []
    for line, factor in BUDGET_FACTORS.items():
        if cost.get(line):
            amount = max((cost[line] * Decimal(factor)).quantize(Decimal(1)), Decimal(1))
            budget_set(business_line=line, month=plan.month, amount=amount, currency="CNY")
            notes.append(f"budget {line}: {amount} CNY ({cost[line] / amount:.0%} of it by the month's end)")
    for line, times in REVENUE_FACTORS.items():
        if cost.get(line):
            revenue = max((cost[line] * times).quantize(Decimal(1)), Decimal(1))
            revenue_set(business_line=line, month=plan.month, amount=revenue, currency="CNY")
            notes.append(f"revenue {line}: {revenue} CNY")
    return notes


def load(plan: Plan, *, progress: Callable[[str], None]) -> Loaded:
    """Generate, configure, ingest, price, accrue: the whole demo month."""
    out = Loaded()
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        out.seconds[name] = time.monotonic() - clock
        clock = time.monotonic()

    records, out.workloads, capacity = generate(plan)
    out.records = len(records)
    lap("generate")
    progress(f"generated {len(records):,} records from {plan.start:%Y-%m-%d %H:%M} to {plan.end:%Y-%m-%d %H:%M} UTC")
    out.notes += configure(plan, capacity)
    out.accepted, out.duplicates, out.rejected = ingest(records, progress=progress)
    lap("ingest")
    hours, entries = price_and_accrue(plan)
    out.notes.append(f"priced {hours} hours; ledger: {entries} journal entries written")
    lap("price + accrue")
    out.notes += plan_budgets(plan)
    return out


def summary(plan: Plan) -> list[str]:
    """What the month holds now, by business line: its tokens, the four health ratios as every
    surface reads them (effective, waste, shadow of the computed tokens, cache hit of the prompt)
    and its cost, as lines to print."""
    from apps.classification.health import ratios_of
    from apps.pricing.selectors import class_usage

    # The plan's records lie before its end (an hour boundary): one row per line, class and component.
    rows = class_usage(
        start=plan.start, end=plan.end, granularity="month", group_by=["business_line", "class", "component"]
    )
    by_line: dict[str, dict[str, int]] = {}
    prompt: dict[str, list[int]] = {}
    cost: dict[str, Decimal] = {}
    for row in rows:
        line, classes = row["business_line"], by_line.setdefault(row["business_line"], {})
        classes[row["class"]] = classes.get(row["class"], 0) + row["tokens"]
        if row["component"] in ("cached_prompt", "uncached_prompt"):
            got = prompt.setdefault(line, [0, 0])
            got[0] += row["tokens"]
            got[1] += row["tokens"] if row["component"] == "cached_prompt" else 0
        cost[line] = cost.get(line, Decimal(0)) + row["cost"].get("CNY", Decimal(0))
    head = ("effective", 9), ("waste", 7), ("cache_hit", 9), ("shadow", 7)
    lines = [f"  {'business line':<18} {'tokens':>14} {' '.join(f'{c:>{w}}' for c, w in head)} {'cost CNY':>12}"]
    for line, classes in sorted(by_line.items()):
        total, (whole, cached) = sum(classes.values()), prompt.get(line, [0, 0])
        ratios = ratios_of(by_class=classes, prompt=whole, prompt_cached=cached)
        shown = [f"{ratios.get(name) or 0:>{w}.1%}" for name, w in head]
        lines.append(f"  {line or '(none)':<18} {total:>14,} {' '.join(shown)} {cost[line]:>12,.2f}")
    return lines


# --- two months: the previous one closed with an approval, the current one so far -------------------

CENTRES = {  # the business lines as finance knows them: cost-centre code and name
    "customer-service": ("CC-1001", "客服中心 / Customer service"),
    "search": ("CC-1002", "搜索 / Search"),
    "marketing": ("CC-1003", "市场营销 / Marketing"),
    "data-platform": ("CC-1004", "数据平台 / Data platform"),
    "payments": ("CC-1005", "支付风控 / Payments risk"),
    "legal": ("CC-1006", "法务 / Legal"),
}
PREPARER, APPROVER = "demo-preparer", "demo-approver"


@dataclass
class Built:
    """What `demo_build` did to each month."""

    month: date
    loaded: Loaded | None  # None: left as it was (closed before this run)
    status: str
    notes: list[str] = field(default_factory=list)


def cost_centres_ensure() -> list[str]:
    """The six lines' cost centres, created once (finance's later edits are kept)."""
    from apps.ledger.models import CostCentre

    made = [
        line
        for line, (code, name) in CENTRES.items()
        if CostCentre.objects.get_or_create(business_line=line, defaults={"code": code, "name": name})[1]
    ]
    return [f"cost centres: {len(CENTRES)} ({len(made)} new), {', '.join(c for c, _ in CENTRES.values())}"]


def demo_user(username: str) -> Any:
    """A finance user of the demo, without a password (`manage.py changepassword` gives one)."""
    from django.contrib.auth.models import Group, User

    user, made = User.objects.get_or_create(username=username)
    if made:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    user.groups.add(Group.objects.get_or_create(name="finance")[0])
    return user


# What demo-preparer says of each kind of month-end finding before submitting the close.
FINDING_REVIEWS = {
    "effective_share_low": ("resolved", "Product owner notified; prompt and output-format review planned."),
    "elastic_over_revenue": ("accepted", "Campaign month: the elastic spend was agreed with the product owner."),
    "revenue_missing": ("accepted", "The line's revenue is booked in its own P&L, not entered here."),
    "structural_zero": ("accepted", "Templates frozen this quarter; the owners are aware."),
    "bill_unreconciled": ("resolved", "Adjustments proposed on the reconciliation page."),
}


def findings_reviewed(*, month: date, user: Any) -> int:
    """Each open month-end finding resolved or accepted, with its reason, by `user`."""
    from apps.ledger.services.closing import close_check, finding_review

    open_ = close_check(key="open_findings", month=month).items
    for entry in open_:
        assert entry.finding is not None
        decision, note = FINDING_REVIEWS.get(entry.finding.kind, ("accepted", "Reviewed at the demo's close."))
        kind, line = entry.finding.kind, entry.finding.business_line
        finding_review(month=month, kind=kind, business_line=line, decision=decision, note=note, user=user)
    return len(open_)


def month_close_approved(*, month: date) -> list[str]:
    """The month closed as a real close is: demo-preparer resolves or accepts each month-end
    finding and submits it (the checklist as it stands now), demo-approver approves it and the
    period closes (its month-end checks store the findings), through the close-request services,
    so the history and audit log are theirs."""
    from apps.ledger.models import CloseRequest
    from apps.ledger.services.closing import close_request_approve, close_request_submit

    preparer, approver = demo_user(PREPARER), demo_user(APPROVER)
    reviewed = findings_reviewed(month=month, user=preparer)
    # A request already waiting (one a month at most) is the one approved.
    if not CloseRequest.objects.filter(month=month, state=CloseRequest.State.SUBMITTED).exists():
        close_request_submit(month=month, user=preparer, note="Month-end close of the demo books.")
    _request, result = close_request_approve(month=month, user=approver, note="Checked against the trial balance.")
    totals = ", ".join(f"{t.debits:,.2f} {t.currency}" for t in result.totals)
    return [
        f"closed {month:%Y-%m}: prepared by {PREPARER}, approved by {APPROVER}; {len(result.findings)} findings "
        f"({reviewed} resolved or accepted by {PREPARER}); "
        f"trial balance {totals or 'empty'}"
    ]


def is_closed(month: date) -> bool:
    from apps.ledger.models import Period

    return Period.objects.filter(month=month, status=Period.Status.CLOSED).exists()


def demo_build(*, records: int, seed: int, progress: Callable[[str], None], now: datetime | None = None) -> list[Built]:
    """The previous month of the accounting zone loaded and closed with an approval (unless it
    is closed already: then it is left as it is), and the current month so far, open; then the
    closed month's audit and the alerts of now, delivered (devtools/demo_ops.py)."""
    current = month_of(now or datetime.now(UTC))
    built = [Built(month=m, loaded=None, status="") for m in (previous_month(current), current)]
    notes = cost_centres_ensure()
    for item in built:
        if is_closed(item.month):
            item.status, item.notes = "closed before: left as it is", []
            continue
        try:
            plan = plan_for(month=item.month, records=records, seed=seed)
        except ValueError as exc:  # the first hour of a month: nothing to show yet
            item.status = str(exc)
            continue
        progress(f"{item.month:%Y-%m}:")
        item.loaded = load(plan, progress=progress)
        if item is built[0]:
            from devtools.demo_ops import supplier_bill

            item.notes = supplier_bill(month=item.month) + month_close_approved(month=item.month)
            item.status = "closed"
        else:
            item.status = "open (in progress)"
    built[0].notes = notes + built[0].notes
    if is_closed(built[0].month):  # audited once closed; what fires now goes to the chat channels
        from devtools.demo_ops import demo_alerts, legacy_collector

        built[1].notes += demo_alerts(audited=built[0].month, now=now or datetime.now(UTC))
        built[1].notes += legacy_collector(now=now or datetime.now(UTC))
    return built
