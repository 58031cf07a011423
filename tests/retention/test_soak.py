"""The soak's own parts (bench/soak.py), without the 30 minutes: its bodies are valid records with
new ids in every batch, and its flatness check catches a process that grows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from apps.ingest.contract import decode_batch
from bench.soak import MIB, MemorySampler, body_fill, percentiles, templates_make


def test_every_batch_is_valid_with_ids_of_its_own_and_the_tallied_tokens() -> None:
    (template,) = templates_make(1, 200)
    first, second = (body_fill(template, n) for n in (1, 2))

    batches = [decode_batch(b, ndjson=False, max_records=1000, max_age=timedelta(days=1)) for b in (first, second)]

    assert [len(b.records) for b in batches] == [200, 200] and not any(b.rejected for b in batches)
    ids = {r.record_id for b in batches for r in b.records}
    assert len(ids) == 400
    assert sum(r.tokens.prompt for r in batches[0].records) == template.prompt
    assert all(abs(r.ts - datetime.now(UTC)) < timedelta(minutes=1) for r in batches[1].records)


def _sampler(series: list[int]) -> MemorySampler:
    sampler = MemorySampler({}, "postgresql://postgres@127.0.0.1:5432/x_soak", every=1)
    sampler.samples = [{"t": float(i), "worker": {"pid": 7, "rss": v, "anon": v}} for i, v in enumerate(series)]
    return sampler


def test_the_flatness_check_passes_noise_and_fails_growth() -> None:
    steady = [200 * MIB + (i % 3) * MIB for i in range(40)]
    growing = [200 * MIB + i * 4 * MIB for i in range(40)]

    assert _sampler(steady).report(0)["worker"]["flat"]
    report = _sampler(growing).report(0)["worker"]
    assert not report["flat"] and report["peak_rss"] == growing[-1]


def test_percentiles_are_in_milliseconds() -> None:
    figures = percentiles([i / 1000 for i in range(1, 101)])
    assert (figures["p50_ms"], figures["p99_ms"], figures["max_ms"]) == (51.0, 100.0, 100.0)
