"""Reclassification in SQL gives the same class rollup as classification at ingest in Python.

Random records (every status, finish reasons, prompt hashes from a small set at distances of
exactly 300 s, 300 s +- 1 us and 0 s, across midnight, several sources, model versions and
business lines, reconciliation records) under random rule sets (moves over dims, tokens,
status, source, versions; disabled built-ins) are ingested in batches:

- in ts order, ingest decides every duplicate as it will stay: reclassifying gives the same;
- in any order, only the days DirtyDay marks may differ, and reclassifying those gives the
  ts-order result.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from typing import Any

from django.db import transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.classification.engine import BUILTIN_RULES
from apps.classification.models import DirtyDay
from apps.classification.services import dirty_days_reclassify, reclassify_run
from tests.classification.helpers import dirty_days, on_days, ruleset_activated, snapshot, store
from tests.factories import collector_key

MIDNIGHT = datetime(2025, 3, 11, tzinfo=UTC)
SOURCES = ("src-0", "src-1")
MOVES = (
    ('dims.team == "x"', "completion", "waste.team_x"),
    ('tokens.prompt > 50 and outcome.status == "ok"', "prompt", "waste.long_prompt"),
    ('outcome.status in ["error", "timeout"]', "all", "shadow.failed_all"),
    ('dims.business_line == "a" or tokens.padding > 3', "padding,output", "effective.line_a"),
    ('source == "src-1"', "cached_prompt", "cache.src_1"),
    ("model_version == null", "structural", "waste.unversioned"),
    ('outcome.finish_reason == "length" and tokens.recomputed * 2 > tokens.draft', "recomputed", "shadow.len"),
    ('dims["costplatform.kind"] == "reconciliation" and model == "big"', "output", "effective.reconciled"),
    ("tokens.reasoning > 2 * (tokens.completion - tokens.reasoning)", "reasoning", "waste.reasoning_overspend"),
)


@st.composite
def token_record(draw: st.DrawFn) -> dict[str, Any]:
    prompt, completion, draft = (draw(st.integers(0, 100)) for _ in range(3))
    dims = {
        name: value
        for name, value in (
            ("business_line", draw(st.sampled_from([None, None, "a", "b"]))),
            ("team", draw(st.sampled_from([None, "x", "y"]))),
            ("costplatform.kind", draw(st.sampled_from([None, None, None, "reconciliation"]))),
        )
        if value is not None
    }
    step = timedelta(seconds=100 * draw(st.integers(-6, 6)), microseconds=draw(st.sampled_from([0, 0, 0, 1, -1])))
    return {
        "source": draw(st.sampled_from(SOURCES[:1] * 3 + SOURCES[1:])),
        "ts": (MIDNIGHT + step + timedelta(days=draw(st.sampled_from([0, 0, 0, 0, 1])))).isoformat(),
        "model": draw(st.sampled_from(["big", "big", "big", "small"])),
        "model_version": draw(st.sampled_from([None, "v1", "v2"])),
        "prompt_hash": draw(st.sampled_from(["aa" * 8, "aa" * 8, "aa" * 8, "bb" * 8, None])),
        "dims": dims,
        "outcome": {
            "status": draw(st.sampled_from(["ok"] * 5 + ["error", "timeout", "aborted", "rejected"])),
            "finish_reason": draw(st.sampled_from([None, "stop", "length", "length"])),
        },
        "tokens": {
            "prompt": prompt,
            "prompt_cached": (cached := draw(st.integers(0, prompt))),
            "prompt_cache_write": draw(st.sampled_from([0, 0, prompt - cached, (prompt - cached) // 2])),
            "completion": completion,
            "reasoning": (reasoning := draw(st.sampled_from([0, 0, completion, completion // 2, completion // 4]))),
            "structural": draw(st.integers(0, completion - reasoning)),
            "padding": draw(st.integers(0, 6)),
            "draft": draft,
            "draft_accepted": draw(st.integers(0, draft)),
            "recomputed": draw(st.integers(0, 20)),
        },
    }


# Where a repeat of a record lands: the window's edges to the microsecond, the same ts, later.
SHIFTS = [
    timedelta(seconds=s, microseconds=u) for s, u in ((300, 0), (300, 1), (299, 999_999), (0, 0), (120, 0), (600, 0))
]


@st.composite
def token_records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Records, and repeats of some of them (same source, hash, model and dims) at SHIFTS
    before or after, which may differ in status, finish reason and tokens."""
    records = draw(st.lists(token_record(), min_size=1, max_size=25))
    for _ in range(draw(st.integers(0, 20))):
        original = draw(st.sampled_from(records))
        shift = draw(st.sampled_from(SHIFTS)) * draw(st.sampled_from([1, -1]))
        other = draw(token_record())
        ts = datetime.fromisoformat(original["ts"]) + shift
        keep = {k: original[k] for k in ("source", "model", "prompt_hash", "dims")}
        if draw(st.booleans()):
            other["outcome"]["status"] = "ok"
        records.append(other | keep | {"ts": ts.isoformat()})
    return records


def ingest(records: list[dict[str, Any]], order: list[int], cuts: list[int]) -> None:
    """Store the records in this order, in batches cut at these positions, per source."""
    source_ids = {name: collector_key(name).key.pk for name in SOURCES}
    sequence = [records[i] for i in order]
    bounds = [0, *sorted(set(cuts)), len(sequence)]
    for lo, hi in pairwise(bounds):
        for name, pk in source_ids.items():
            store(pk, ({k: v for k, v in r.items() if k != "source"} for r in sequence[lo:hi] if r["source"] == name))


def days_of(records: list[dict[str, Any]]) -> tuple[date, date]:
    days = [datetime.fromisoformat(r["ts"]).astimezone(UTC).date() for r in records]
    return min(days), max(days) + timedelta(days=1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=token_records(),
    moves=st.lists(st.sampled_from(MOVES), max_size=4),
    disabled=st.sets(st.sampled_from(BUILTIN_RULES), max_size=3),
    data=st.data(),
)
def test_reclassify_gives_the_ingest_time_classes(db, records, moves, disabled, data):
    for i, record in enumerate(records):
        record["record_id"] = f"req-{i}"
    by_ts = sorted(range(len(records)), key=lambda i: datetime.fromisoformat(records[i]["ts"]))
    arrival = data.draw(st.permutations(range(len(records))))
    cuts = data.draw(st.lists(st.integers(1, len(records)), max_size=8))
    start, end = days_of(records)

    with transaction.atomic():
        ruleset_activated(moves=moves, disabled=disabled)
        ingest(records, by_ts, cuts)
        in_ts_order = snapshot()
        assert not DirtyDay.objects.exists()
        event(f"duplicates: {any(key[6] == 'waste.duplicate' for key in in_ts_order)}")
        reclassify_run(start=start, end=end)
        assert snapshot() == in_ts_order
        transaction.set_rollback(True)

    with transaction.atomic():
        ruleset_activated(moves=moves, disabled=disabled)
        ingest(records, arrival, cuts)
        dirty = dirty_days()
        event(f"dirty days: {len(dirty)}, changed by them: {snapshot() != in_ts_order}")
        assert on_days(snapshot(), dirty, keep=False) == on_days(in_ts_order, dirty, keep=False)
        assert sorted(dirty_days_reclassify(max_days=10)) == sorted(dirty)
        assert snapshot() == in_ts_order
        assert not DirtyDay.objects.exists()
        transaction.set_rollback(True)
