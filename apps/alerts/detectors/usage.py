"""Detectors over token usage and unit cost: spike, trend, unattributed growth."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from statistics import median

from apps.alerts.detectors.registry import DetectionResult, Params, register_detector

MAD_TO_SIGMA = 1.4826  # the MAD of a normal distribution is 0.6745 sigma


@dataclass(frozen=True)
class SpikeInput:
    current: int  # tokens so far in the current hour
    baseline: list[int]  # tokens in the same hour of the week, previous weeks (0 where none)
    elapsed: float  # fraction of the current hour gone, (0, 1]


@register_detector(
    "spike",
    source="spike_series",
    defaults={"by": "business_line", "factor": 2.0, "weeks": 4, "mads": 3.0, "min_tokens": 10_000, "min_elapsed": 0.1},
)
def spike(series: SpikeInput, p: Params) -> DetectionResult:
    """Consumption so far this hour against the median of the same hour of the week (pro-rated
    to the part of the hour gone): fires at `factor` times the median, and only when that is
    also `mads` robust deviations above it and at least `min_tokens`."""
    elapsed = max(series.elapsed, p["min_elapsed"])
    expected = median(series.baseline) * elapsed if series.baseline else 0.0
    spread = median(abs(v - median(series.baseline)) for v in series.baseline) * elapsed if series.baseline else 0.0
    threshold = max(p["factor"] * expected, expected + p["mads"] * MAD_TO_SIGMA * spread, p["min_tokens"] * elapsed)
    ratio = round(series.current / expected, 2) if expected else None
    figures = {
        "tokens": series.current,
        "threshold": round(threshold),
        "baseline": round(expected),
        "ratio": ratio,
        "factor": p["factor"],
    }
    return DetectionResult(firing=series.current >= threshold, figures=figures)


@register_detector("trend", source="unit_cost_series", defaults={"days": 3, "min_rise": 0.02})
def trend(daily: list[Decimal], p: Params) -> DetectionResult:
    """Cost per 1k tokens rising `days` consecutive days (each day above the one before by
    more than `min_rise`, a fraction: 2 %, so the day-to-day wobble of a steady mix of models and
    cache hits, a few tenths of a percent, is no trend). `daily` is oldest first and ends with
    yesterday."""
    days = p["days"]
    if len(daily) < days + 1:
        return DetectionResult(firing=False)
    last = daily[-(days + 1) :]
    rising = all(b > a * (1 + Decimal(str(p["min_rise"]))) for a, b in pairwise(last))
    return DetectionResult(firing=rising, figures={"days": [round(float(v), 4) for v in last]})


@dataclass(frozen=True)
class ShareInput:
    current: float  # unattributed share of tokens in the last window
    previous: list[float]  # the same share in the windows before


@register_detector(
    "unattributed",
    source="unattributed_series",
    defaults={"window_hours": 1, "windows": 24, "factor": 1.5, "min_share": 0.05},
)
def unattributed(series: ShareInput, p: Params) -> DetectionResult:
    """The share of tokens without a business line grows: above `min_share` and `factor`
    times its median over the previous windows."""
    base = median(series.previous) if series.previous else 0.0
    firing = series.current >= p["min_share"] and series.current > p["factor"] * base
    figures: dict[str, object] = {"share": round(series.current, 4), "baseline_share": round(base, 4)}
    figures["_limits"] = {"share": f"≥ {p['min_share']:.1%}, > {p['factor']} \u00d7"}
    return DetectionResult(firing=firing, figures=figures)
