"""A generated month of token records: interactive traffic that follows the day (the clean
month), and workloads to plant in it, each returning the records it made so tests can sum the
tokens they expect. Records go in through the real ingest service and are priced by the real
pricing job."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from apps.pipeline.records import batch_ingest
from apps.pricing.services import hours_price
from tests import factories

MONTH = "2026-11"
START = datetime(2026, 11, 1, tzinfo=UTC)
END = datetime(2026, 12, 1, tzinfo=UTC)
AFTER = datetime(2026, 12, 1, 3, tzinfo=UTC)  # when the tests run the audit
SMALL, LARGE = "qwen2.5-7b-instruct", "qwen2.5-72b-instruct"
# Per million tokens: input, cached input, output.
PRICES = {SMALL: ("2", "0.5", "6"), LARGE: ("8", "2", "24")}

ZOMBIE = {"business_line": "data-platform", "team": "etl", "feature": "load-test", "env": "staging"}
DUPLICATES = {"business_line": "search", "team": "search-web", "feature": "autocomplete", "env": "prod"}
LOOPS = {"business_line": "customer-service", "team": "cs-bot", "feature": "agent", "step": "plan", "env": "prod"}
RETRIES = {"business_line": "payments", "team": "risk", "feature": "risk-check", "env": "prod"}
MISMATCH = {"business_line": "customer-service", "team": "cs-bot", "feature": "intent", "env": "prod"}
SYSTEM = {"business_line": "marketing", "team": "growth", "feature": "copywriter", "env": "prod"}
BLOAT = {"business_line": "legal", "team": "contracts", "feature": "doc-qa", "env": "prod"}
THINKER = {"business_line": "research", "team": "analysts", "feature": "deep-answer", "env": "prod"}


class Month:
    def __init__(self, seed: int = 6) -> None:
        self.rng = random.Random(seed)
        self.records: list[dict[str, Any]] = []
        self.ids = 0

    def hash(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def add(self, ts: datetime, dims: dict[str, str], *, prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
        self.ids += 1
        cached = extra.pop("cached", 0)
        record: dict[str, Any] = {
            "record_id": f"gen-{self.ids:07d}",
            "ts": ts.isoformat(),
            "model": extra.pop("model", SMALL),
            "endpoint": "chat.completions",
            "dims": dims,
            "tokens": {"prompt": prompt, "prompt_cached": cached, "completion": completion}
            | {"prompt_cache_write": extra.pop("written", 0)}
            | {"system": extra.pop("system", prompt // 5), "tool": extra.pop("tool", prompt // 5)}
            | {"reasoning": extra.pop("reasoning", 0)},
            "outcome": {"status": extra.pop("status", "ok"), "finish_reason": "stop"},
            "prompt_hash": extra.pop("prompt_hash", None) or self.hash(),
        } | extra
        self.records.append(record)
        return record

    # --- the clean month ---------------------------------------------------------------------

    def interactive(self) -> None:
        """People: busy in the (Beijing) day, 00-12 UTC, one request an hour at night; chats of a
        few turns with fresh prompts."""
        features = [
            {"business_line": "customer-service", "team": "cs-bot", "feature": "faq", "env": "prod"},
            {"business_line": "search", "team": "search-web", "feature": "qa", "env": "prod"},
            {"business_line": "customer-service", "team": "cs-bot", "feature": "chat", "env": "prod"},
        ]
        for day in range(30):
            for hour in range(24):
                at = START + timedelta(days=day, hours=hour)
                for dims in features:
                    for i in range(3 if hour < 12 else self.rng.choice((0, 1))):
                        conv = {"conversation_id": f"c-{day}-{hour}-{dims['feature']}-{i // 3}"}
                        self.add(
                            at + timedelta(minutes=self.rng.randrange(60)),
                            dims | conv if dims["feature"] == "chat" else dims,
                            prompt=self.rng.randrange(600, 1500),
                            cached=self.rng.randrange(0, 400),
                            completion=self.rng.randrange(80, 300),
                        )

    # --- planted workloads ---------------------------------------------------------------------

    def zombie(self) -> list[dict[str, Any]]:
        """A forgotten load test: the same request size every hour of the month, day and night."""
        return [
            self.add(
                START + timedelta(hours=h, minutes=17),
                ZOMBIE,
                prompt=self.rng.randrange(1900, 2100),
                completion=self.rng.randrange(450, 550),
            )
            for h in range(30 * 24)
        ]

    def duplicates(self, written: int = 0) -> list[dict[str, Any]]:
        """Five prompts asked 12 times each by different users (no conversation): 11 repeats each,
        each writing `written` of its prompt to a provider's prompt cache."""
        made = []
        for _ in range(5):
            prompt_hash, prompt, completion = self.hash(), self.rng.randrange(800, 1200), self.rng.randrange(100, 200)
            for user in range(12):
                at = START + timedelta(days=self.rng.randrange(30), hours=self.rng.randrange(12))
                dims = DUPLICATES | {"user": f"u{user}"}
                made.append(
                    self.add(at, dims, prompt=prompt, completion=completion, prompt_hash=prompt_hash, written=written)
                )
        return made

    def loops(self) -> list[dict[str, Any]]:
        """Three agent conversations of 30 calls cycling over 3 prompts of their own: 27 repeats each."""
        made = []
        for conv in range(3):
            at = START + timedelta(days=3 + conv, hours=2)
            hashes = [self.hash() for _ in range(3)]
            for call in range(30):
                dims = LOOPS | {"conversation_id": f"loop-{conv}"}
                made.append(
                    self.add(
                        at + timedelta(seconds=20 * call),
                        dims,
                        prompt=1500,
                        cached=500,
                        completion=120,
                        prompt_hash=hashes[call % 3],
                    )
                )
        return made

    def retry_storm(self) -> list[dict[str, Any]]:
        """Two hours where each of 40 requests an hour failed once and was retried; returns the failures."""
        failed = []
        for hour in (10, 11):
            for i in range(40):
                at = START + timedelta(days=11, hours=hour, minutes=i)
                first = self.add(at, RETRIES, prompt=1400, completion=60, status="error")
                self.add(at + timedelta(seconds=5), RETRIES, prompt=1400, completion=200, attempt=2)
                self.records[-1]["retry_of"] = first["record_id"]
                failed.append(first)
        return failed

    def mismatch(self) -> list[dict[str, Any]]:
        """Intent detection on the large model: 150 short requests (and 20 long ones)."""
        short = []
        for i in range(170):
            at = START + timedelta(days=i % 28, hours=i % 12, minutes=i % 60)
            long = i >= 150
            record = self.add(
                at, MISMATCH, model=LARGE, prompt=3000 if long else 300 + i, completion=400 if long else 20 + i % 30
            )
            if not long:
                short.append(record)
        return short

    def system_prompt(self) -> list[dict[str, Any]]:
        """A 2,400-token system prompt in a 3,000-token prompt, never cached: 300 requests."""
        return [
            self.add(START + timedelta(days=i % 30, hours=i % 12), SYSTEM, prompt=3000, completion=150, system=2400)
            for i in range(300)
        ]

    def context_bloat(self) -> list[dict[str, Any]]:
        """Document Q&A whose retrieved context grows by 40 tokens a day: 30 requests a day."""
        return [
            self.add(
                START + timedelta(days=day, hours=i % 12, minutes=i),
                BLOAT,
                prompt=1300 + 40 * day,
                completion=200,
                tool=500 + 40 * day,
            )
            for day in range(30)
            for i in range(30)
        ]

    def reasoning(self) -> list[dict[str, Any]]:
        """A reasoning model thinking 9x its 100-token answer, 200 requests (overspent under a rule
        with N = 4), beside 100 requests thinking 3x (within it)."""
        over = [
            self.add(START + timedelta(days=i % 30, hours=i % 12), THINKER, prompt=400, completion=1000, reasoning=900)
            for i in range(200)
        ]
        for i in range(100):
            self.add(
                START + timedelta(days=i % 30, hours=1 + i % 11), THINKER, prompt=400, completion=400, reasoning=300
            )
        return over

    # --- into the platform ---------------------------------------------------------------------

    def ingest(self) -> None:
        """Store the records through ingest, then price the month with the test price list."""
        source = factories.collector_key("gen-collector", backfill=True)  # a month in the past
        for i in range(0, len(self.records), 5000):
            body = json.dumps({"records": self.records[i : i + 5000]}).encode()
            result = batch_ingest(key=source.key, body=body, ndjson=False)
            assert not result.rejected, result.rejected[:3]
        factories.price_version(effective_from=datetime(2026, 10, 1, tzinfo=UTC), prices=PRICES)
        hours_price(start=START, end=END)


def tokens(records: list[dict[str, Any]]) -> int:
    return sum(r["tokens"]["prompt"] + r["tokens"]["completion"] for r in records)


def money(records: list[dict[str, Any]], scale: Decimal = Decimal(1), cache_write: str | None = None) -> Decimal:
    """What the records cost at PRICES (times `scale`), their prompt-cache writes at `cache_write`
    per million where given, else as input."""
    total = Decimal(0)
    for r in records:
        i, c, o = (Decimal(p) / 1_000_000 for p in PRICES[r["model"]])
        w = Decimal(cache_write) / 1_000_000 if cache_write is not None else i
        t = r["tokens"]
        written = t["prompt_cache_write"]
        total += (t["prompt"] - t["prompt_cached"] - written) * i + t["prompt_cached"] * c + t["completion"] * o
        total += written * w
    return total * scale
