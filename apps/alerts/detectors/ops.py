"""Detectors over the platform itself: rejected records, silent collectors, and the ledger's
month-end findings (delivered once each)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Any

from apps.alerts.detectors.registry import DetectionResult, Params, register_detector


@dataclass(frozen=True)
class CountInput:
    current: int  # rejected records in the last window
    previous: list[int]  # in each window before


@register_detector(
    "dead_letters",
    source="rejection_series",
    defaults={"window_hours": 1, "windows": 24, "factor": 3.0, "min_count": 10},
)
def dead_letters(series: CountInput, p: Params) -> DetectionResult:
    """Rejected records (dead letters) grow: at least `min_count` in the window and more than
    `factor` times the median of the windows before."""
    base = median(series.previous) if series.previous else 0
    firing = series.current >= p["min_count"] and series.current > p["factor"] * base
    figures = {"rejected": series.current, "baseline_rejected": base, "factor": p["factor"]}
    figures["_limits"] = {"rejected": f"≥ {p['min_count']}"}
    return DetectionResult(firing=firing, figures=figures)


@dataclass(frozen=True)
class SeenInput:
    last_seen: datetime
    now: datetime


@register_detector("collector_silent", source="collector_series", defaults={"silent_minutes": 30, "lookback_days": 7})
def collector_silent(series: SeenInput, p: Params) -> DetectionResult:
    """An active collector that sent records in the last `lookback_days` has sent nothing for
    `silent_minutes`."""
    silent = (series.now - series.last_seen).total_seconds() / 60
    figures: dict[str, Any] = {"last_seen": series.last_seen.isoformat(), "silent_minutes": int(silent)}
    figures["_limits"] = {"silent_minutes": f"≥ {p['silent_minutes']}"}
    return DetectionResult(firing=silent >= p["silent_minutes"], figures=figures)


@register_detector("ledger_finding", source="finding_series", defaults={}, events=True)
def ledger_finding(finding: dict[str, Any], p: Params) -> DetectionResult:
    """A month-end check's finding (effective share low, elastic over revenue, structural zero...)."""
    figures = {"message": finding["message"], "period": finding["period"], "_id": finding["id"]}
    # The kind and the check's numbers, so that the message is written in each channel's language.
    figures["_finding"] = {k: v for k, v in finding.items() if k not in ("id", "message")}
    return DetectionResult(firing=True, figures=figures)
