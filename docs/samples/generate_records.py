"""Write docs/samples/records.ndjson: a week of token records v1 from a made-up vLLM fleet.

    python docs/samples/generate_records.py [--count 3000] [--out docs/samples/records.ndjson]

Deterministic (seeded): the same arguments always give the same file. Timestamps run over the
7 days before END; `make run` (devtools/run.py) shifts them so the file ends "now" when it
loads it. Besides valid records the file holds a few re-sent records (duplicates) and a few
deliberately invalid lines, so the ingest summary shows every outcome. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

END = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
DAYS = 7
SEED = 20250115

# (name, version, endpoint mix, speculative decoding, share of traffic)
MODELS = [
    ("meta-llama/Llama-3.1-70B-Instruct", "fp8-vllm0.6.4", {"chat.completions": 0.9, "responses": 0.1}, True, 0.30),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16-vllm0.6.4", {"chat.completions": 0.7, "completions": 0.3}, False, 0.30),
    ("Qwen/Qwen2.5-32B-Instruct", "awq-vllm0.6.4", {"chat.completions": 1.0}, False, 0.20),
    (
        "mistralai/Mistral-7B-Instruct-v0.3",
        "bf16-vllm0.6.3",
        {"completions": 0.6, "chat.completions": 0.4},
        False,
        0.08,
    ),
    ("BAAI/bge-m3", "fp16-vllm0.6.4", {"embeddings": 1.0}, False, 0.12),
]

# business_line -> team -> project -> features (feature -> steps)
ORG = {
    "support": {
        "cx-automation": {
            "helpdesk-bot": {"answer": ["retrieve", "draft", "answer"], "triage": ["classify"]},
            "email-assist": {"reply-draft": ["draft", "rewrite"]},
        },
    },
    "search": {
        "discovery": {
            "semantic-search": {"query-rewrite": ["rewrite"], "rerank": ["rerank"], "index": ["embed"]},
        },
    },
    "sales": {
        "revenue-ops": {
            "crm-copilot": {"call-summary": ["summarize"], "lead-score": ["classify"]},
        },
    },
    "internal-tools": {
        "platform": {
            "code-assist": {"completion": ["complete"], "review": ["review", "summarize"]},
            "eval-harness": {"nightly-eval": ["judge"]},
        },
    },
}
BUSINESS_SHARE = {"support": 0.40, "search": 0.25, "sales": 0.15, "internal-tools": 0.20}
SYSTEM_PROMPT_TOKENS = {
    "answer": 420,
    "triage": 260,
    "reply-draft": 380,
    "query-rewrite": 150,
    "rerank": 120,
    "call-summary": 310,
    "lead-score": 280,
    "completion": 90,
    "review": 350,
    "nightly-eval": 520,
}
JSON_OUTPUT_FEATURES = {"triage", "lead-score", "rerank", "nightly-eval"}  # structured output: scaffolding tokens
TIERED_FEATURES = {"answer", "reply-draft", "call-summary"}


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return max(low, min(high, round(median * math.exp(rng.gauss(0, sigma)))))


def _timestamps(rng: random.Random, count: int) -> list[datetime]:
    """Arrival times over DAYS days: busier in working hours (UTC 7-19), quieter at weekends."""
    start = END - timedelta(days=DAYS)
    out = []
    while len(out) < count:
        ts = start + timedelta(seconds=rng.uniform(0, DAYS * 86400))
        weight = 1.0 if 7 <= ts.hour < 19 else 0.3
        weight *= 0.4 if ts.weekday() >= 5 else 1.0
        if rng.random() < weight:
            out.append(ts.replace(microsecond=ts.microsecond // 1000 * 1000))
    return sorted(out)


def _rfc3339(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def _record(rng: random.Random, ts: datetime, prompts: dict[str, list[str]]) -> dict:
    model, version, endpoints, speculative, _ = rng.choices(MODELS, weights=[m[4] for m in MODELS])[0]
    endpoint = _pick(rng, endpoints)
    business_line = _pick(rng, BUSINESS_SHARE) if endpoint != "embeddings" else "search"
    team = rng.choice(list(ORG[business_line]))
    project = rng.choice(list(ORG[business_line][team]))
    feature = rng.choice(list(ORG[business_line][team][project]))
    if endpoint == "embeddings":
        team, project, feature = "discovery", "semantic-search", "index"
    step = rng.choice(ORG[business_line][team][project][feature])
    dims = {
        "business_line": business_line,
        "team": team,
        "project": project,
        "feature": feature,
        "step": step,
        "env": "prod" if rng.random() < 0.9 else "staging",
        "user": f"u{rng.randrange(1, 400):04d}",
    }
    record: dict = {"record_id": f"req-{uuid.UUID(int=rng.getrandbits(128), version=4)}", "ts": _rfc3339(ts)}
    record["model"], record["model_version"], record["endpoint"] = model, version, endpoint

    if endpoint == "embeddings":
        prompt = _lognormal(rng, 380, 0.6, 8, 8192)
        tokens = {"prompt": prompt, "completion": 0}
        record["tokens"] = tokens
        record["outcome"] = {"status": "ok", "finish_reason": "stop"}
        record["dims"] = dims
        record["timing"] = {"queued": rng.randrange(0, 20), "e2e": 5 + prompt // 40}
        return record

    dims["conversation"] = f"c{rng.randrange(1, 1500):05d}"
    rag = step in {"retrieve", "answer", "draft", "rerank", "review"}
    prompt = _lognormal(rng, 2600 if rag else 900, 0.7, 40, 120_000)
    system = min(SYSTEM_PROMPT_TOKENS.get(feature, 200), prompt // 2)
    tool = round((prompt - system) * rng.uniform(0.3, 0.7)) if rag else 0
    # Prefix caching: system prompt and earlier turns are often cached.
    cached = 0 if rng.random() < 0.35 else min(prompt, round(system + (prompt - system) * rng.uniform(0.0, 0.8)))
    max_tokens = 1024 if feature not in JSON_OUTPUT_FEATURES else 256
    completion = _lognormal(rng, 60 if feature in JSON_OUTPUT_FEATURES else 280, 0.8, 1, 4096)
    finish = "length" if completion >= max_tokens else ("tool_calls" if rng.random() < 0.04 else "stop")
    completion = min(completion, max_tokens)
    status = _pick(rng, {"ok": 0.945, "aborted": 0.025, "error": 0.012, "timeout": 0.01, "rejected": 0.008})
    if status == "aborted":  # client went away: tokens generated so far still cost
        completion, finish = rng.randrange(0, max(1, completion)), "abort"
    elif status in {"error", "timeout"}:
        completion, finish = rng.randrange(0, max(1, completion // 2)), "error" if status == "error" else None
    elif status == "rejected":  # refused at admission (queue full): no prefill, nothing cached
        completion, finish, cached = 0, None, 0
    tokens = {"prompt": prompt, "completion": completion}
    if cached:
        tokens["prompt_cached"] = cached
    if system:
        tokens["system"] = system
    if tool:
        tokens["tool"] = tool
    if feature in JSON_OUTPUT_FEATURES and completion:
        tokens["structural"] = round(completion * rng.uniform(0.15, 0.35))
    if speculative and completion:
        draft = round(completion * rng.uniform(1.2, 1.8))
        tokens["draft"], tokens["draft_accepted"] = draft, min(draft, round(completion * rng.uniform(0.55, 0.8)))
    if status == "ok" and rng.random() < 0.015:  # preempted under memory pressure, prompt recomputed
        tokens["recomputed"] = prompt - cached
    if rng.random() < 0.05 and model.endswith("8B-Instruct"):  # batch padding on the small model
        tokens["padding"] = rng.randrange(1, 64)
    record["tokens"] = tokens
    record["outcome"] = {"status": status} if finish is None else {"status": status, "finish_reason": finish}
    record["dims"] = dims
    if status != "rejected":
        queued = _lognormal(rng, 40, 1.2, 0, 30_000)
        prefill = 10 + (prompt - cached) // 25
        decode = completion * rng.randrange(12, 35)
        timing = {"queued": queued, "ttft": queued + prefill, "prefill": prefill, "decode": decode}
        timing["e2e"] = 60_000 if status == "timeout" else queued + prefill + decode
        record["timing"] = timing
    # Templated prompts repeat: a few hashes per feature.
    hashes = prompts.setdefault(feature, [f"{rng.getrandbits(128):032x}" for _ in range(5)])
    record["prompt_hash"] = rng.choice(hashes) if feature in JSON_OUTPUT_FEATURES else f"{rng.getrandbits(128):032x}"
    if feature in TIERED_FEATURES:
        record["quality_tier"] = _pick(rng, {"high": 0.5, "mid": 0.35, "low": 0.15})
    return record


def _retry(rng: random.Random, failed: dict) -> dict:
    """The client's second try of a failed request, a few seconds later."""
    again = json.loads(json.dumps(failed))
    ts = datetime.fromisoformat(failed["ts"]) + timedelta(seconds=rng.uniform(1, 8))
    again["record_id"] = f"req-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
    again["ts"] = _rfc3339(ts)
    again["attempt"] = failed.get("attempt", 1) + 1
    again["retry_of"] = failed["record_id"]
    again["outcome"] = {"status": "ok", "finish_reason": "stop"}
    tokens = again["tokens"]
    tokens["completion"] = max(tokens["completion"], 1)
    tokens["prompt_cached"] = tokens["prompt"] - tokens.get("tool", 0) // 2  # the first try warmed the cache
    tokens.pop("structural", None)
    tokens.pop("draft", None)
    tokens.pop("draft_accepted", None)
    return again


def _invalid(ts: datetime) -> list[str]:
    """Lines a buggy collector might send; each is refused with a reason."""
    base = {"ts": _rfc3339(ts), "model": "meta-llama/Llama-3.1-8B-Instruct", "outcome": {"status": "ok"}}

    def line(record_id: str, **fields: object) -> str:
        return json.dumps({"record_id": record_id, **base, **fields}, separators=(",", ":"))

    return [
        line("bad-cached-over-prompt", tokens={"prompt": 100, "completion": 5, "prompt_cached": 150}),
        line("bad-negative-count", tokens={"prompt": 100, "completion": -3}),
        line("bad-unknown-field", tokens={"prompt": 100, "completion": 5}, cost_usd=0.0012),
        json.dumps(
            {
                "record_id": "bad-no-model",
                "ts": _rfc3339(ts),
                "tokens": {"prompt": 10, "completion": 1},
                "outcome": {"status": "ok"},
            },
            separators=(",", ":"),
        ),
        line("bad-naive-ts", tokens={"prompt": 100, "completion": 5}).replace(_rfc3339(ts), _rfc3339(ts)[:-5]),
        line("bad-status", tokens={"prompt": 100, "completion": 5}, outcome={"status": "success"}),
        line("bad-truncated", tokens={"prompt": 100, "completion": 5})[:70],
    ]


def generate(count: int) -> list[str]:
    rng = random.Random(SEED)
    prompts: dict[str, list[str]] = {}
    records = [_record(rng, ts, prompts) for ts in _timestamps(rng, count)]
    retries = [_retry(rng, r) for r in records if r["outcome"]["status"] in {"error", "timeout"} and rng.random() < 0.7]
    records = sorted(records + retries, key=lambda r: r["ts"])[:count]
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    # A collector that re-sent part of a batch after a lost response: exact repeats, counted once.
    for position in sorted(rng.sample(range(200, len(lines)), 10), reverse=True):
        lines.insert(position + rng.randrange(1, 40), lines[position])
    invalid = _invalid(END - timedelta(days=2, hours=3))
    for position, bad in zip(sorted(rng.sample(range(len(lines)), len(invalid))), invalid, strict=True):
        lines.insert(position, bad)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="valid records to write (default 3000)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("records.ndjson"))
    args = parser.parse_args()
    lines = generate(args.count)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} lines to {args.out}")


if __name__ == "__main__":
    main()
