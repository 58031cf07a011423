"""The prometheus-client Collector that turns a database snapshot into metric families.

collect() reads the database at most once per METRICS_CACHE_SECONDS per process: scrapes in
between (several Prometheus servers, a dashboard refresh) get the same families."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from apps.classification.health import RATIOS, ratios_of
from apps.metrics.budgets import budget_families
from apps.metrics.selectors import Snapshot, platform_snapshot
from apps.plans.budget_state import budget_states

WINDOWS = (("1h", "the current clock hour so far"), ("24h", "the 24 hour buckets ending with the current one"))
ROLLING = (("1h", "the last 60 minutes"), ("24h", "the last 24 hours"))


def _windowed(
    name: str, help_text: str, labels: list[str], rows: Iterable[tuple[Any, ...]], windows: tuple = WINDOWS
) -> list[GaugeMetricFamily]:
    """One family per window from rows (labels..., value in the hour, value in the day)."""
    families = [
        GaugeMetricFamily(f"{name}_{suffix}", f"{help_text}, {what}.", labels=labels) for suffix, what in windows
    ]
    width = len(labels)
    for row in rows:
        values = [str(v) for v in row[:width]]
        for family, value in zip(families, row[width:], strict=True):
            family.add_metric(values, float(value))
    return families


def _health(shot: Snapshot) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "costplatform_health_ratio_24h",
        "Health ratios over the 24 h rollup window: effective, waste and shadow tokens over the computed "
        "tokens (all but the cache class), cache_hit = cached over all prompt tokens. Absent with no tokens.",
        labels=["ratio"],
    )
    by_class: dict[str, int] = {}
    for token_class, _reason, _model, _line, _hour, day in shot.tokens:
        by_class[token_class] = by_class.get(token_class, 0) + day
    prompt, cached = shot.prompt
    ratios = ratios_of(by_class=by_class, prompt=prompt, prompt_cached=cached)
    for name, _field, _bound in RATIOS:
        value = ratios.get(name)
        if value is not None:
            family.add_metric([name], value)
    return family


def _sources(shot: Snapshot, now: float) -> Iterator[GaugeMetricFamily]:
    lag = GaugeMetricFamily(
        "costplatform_ingest_lag_seconds",
        "Seconds from the ts of a collector key's newest record to now (keys that sent in the last 2 days).",
        labels=["source"],
    )
    seen = GaugeMetricFamily(
        "costplatform_collector_last_seen_timestamp_seconds",
        "When a collector key last called the ingest API (Unix time, minute resolution).",
        labels=["source"],
    )
    for source, last_seen, newest in shot.lag:
        if newest is not None:
            lag.add_metric([source], now - newest)
        if last_seen is not None:
            seen.add_metric([source], last_seen)
    yield lag
    yield seen


def families(shot: Snapshot, *, now: float) -> list[Metric]:
    """Every family /metrics reports from a snapshot read at `now` (Unix time)."""
    out: list[Metric] = []
    out += _windowed(
        "costplatform_tokens",
        "Processed tokens by class and reason (classification rollup)",
        ["class", "reason", "model", "business_line"],
        shot.tokens,
    )
    out += _windowed(
        "costplatform_cost",
        "Cost of the priced tokens, in the currency of the price book or pool",
        ["class", "model", "business_line", "currency"],
        shot.cost,
    )
    out += _windowed(
        "costplatform_records",
        "Token records (requests) by outcome status",
        ["model", "business_line", "status"],
        shot.records,
    )
    out.append(_health(shot))
    unpriced = GaugeMetricFamily(
        "costplatform_unpriced_tokens_24h",
        "Tokens that neither a price nor a cost pool covered, over the 24 h rollup window.",
        labels=["model"],
    )
    for model, tokens in shot.unpriced:
        unpriced.add_metric([model], tokens)
    out.append(unpriced)
    out += _sources(shot, now)
    refused = "Records and bodies refused by ingest (dead letters)"
    out += _windowed("costplatform_rejections", refused, ["source"], shot.rejections, ROLLING)
    out += _windowed(
        "costplatform_alert_notifications",
        "Alert delivery attempts due, by channel kind and status",
        ["channel_kind", "status"],
        shot.deliveries,
        ROLLING,
    )
    out.append(GaugeMetricFamily("costplatform_alert_notifications_overdue", "Queued deliveries due.", shot.overdue))
    firing = GaugeMetricFamily("costplatform_alerts_firing", "Alert subjects firing, by detector.", labels=["detector"])
    for detector, count in shot.firing:
        firing.add_metric([detector], count)
    out.append(firing)
    return out


class PlatformCollector(Collector):
    """Reads the database at most every `ttl` seconds; describe() is empty so registering it
    never touches the database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: list[Metric] = []
        self._at = float("-inf")

    def describe(self) -> list[Metric]:
        return []

    def clear(self) -> None:
        with self._lock:
            self._cached, self._at = [], float("-inf")

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if time.monotonic() - self._at >= settings.METRICS_CACHE_SECONDS:
                self._cached = self._read()
                self._at = time.monotonic()
            found = self._cached
        yield from found

    def _read(self) -> list[Metric]:
        started = time.perf_counter()
        now = datetime.now(UTC)
        shot = platform_snapshot(
            now=now, top_lines=settings.METRICS_TOP_BUSINESS_LINES, top_models=settings.METRICS_TOP_MODELS
        )
        out = families(shot, now=now.timestamp())
        out += budget_families(budget_states(now=now))
        out.append(
            GaugeMetricFamily(
                "costplatform_metrics_read_seconds",
                "Seconds the last database read for /metrics took (it is cached between scrapes).",
                time.perf_counter() - started,
            )
        )
        return out


platform_collector = PlatformCollector()
