"""Detectors over budgets and the health ratios."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from apps.alerts.detectors.registry import DetectionResult, Params, register_detector


@dataclass(frozen=True)
class BudgetInput:
    spent: Decimal  # month to date, in the budget's currency (or tokens)
    budget: Decimal
    elapsed: float  # fraction of the month gone, (0, 1]
    unit: str  # a currency, or "tokens"


@register_detector(
    "budget",
    source="budget_series",
    defaults={"warn_at": 0.8, "forecast": True, "min_elapsed": 0.2},
    levels=("forecast", "80", "100"),
)
def budget(series: BudgetInput, p: Params) -> DetectionResult:
    """A budget's month-to-date use (a line's, a team's or a caller's) at 80 % and 100 % of it,
    and a linear forecast to exceed it by month end (from `min_elapsed` of the month on, when
    noise settles)."""
    used = series.spent / series.budget if series.budget else Decimal(0)
    forecast = series.spent / Decimal(str(max(series.elapsed, 1e-6)))
    figures = {
        "spent": f"{series.spent:,.2f} {series.unit}",
        "budget": f"{series.budget:,.2f} {series.unit}",
        "used": f"{used:.0%}",
        "forecast": f"{forecast:,.2f} {series.unit}",
        "_limits": {"used": f"{p['warn_at']:.0%} / 100%"},
    }
    if used >= 1:
        return DetectionResult(firing=True, figures=figures, level="100", critical=True)
    if used >= Decimal(str(p["warn_at"])):
        return DetectionResult(firing=True, figures=figures, level="80")
    if p["forecast"] and series.elapsed >= p["min_elapsed"] and forecast > series.budget:
        return DetectionResult(firing=True, figures=figures, level="forecast")
    return DetectionResult(firing=False, figures=figures)


@dataclass(frozen=True)
class HealthInput:
    total: int  # classified tokens in the window
    effective: int
    waste: int
    shadow: int
    prompt: int
    prompt_cached: int


@register_detector(
    "health",
    source="health_series",
    defaults={
        "window_hours": 24,
        "min_tokens": 100_000,
        "effective_min": 0.75,
        "waste_max": 0.15,
        "cache_hit_min": 0.60,
        "shadow_max": 0.08,
    },
)
def health(series: HealthInput, p: Params) -> DetectionResult:
    """The seeds' healthy thresholds: effective >= 75 %, waste <= 15 %, cache hit >= 60 %,
    shadow <= 8 %. Fires when any is out of range over the window (with enough tokens)."""
    if series.total < p["min_tokens"]:
        return DetectionResult(firing=False)
    ratios = {
        "effective": series.effective / series.total,
        "waste": series.waste / series.total,
        "cache_hit": series.prompt_cached / series.prompt if series.prompt else 1.0,
        "shadow": series.shadow / series.total,
    }
    breaches = [
        name
        for name, bad in (
            ("effective", ratios["effective"] < p["effective_min"]),
            ("waste", ratios["waste"] > p["waste_max"]),
            ("cache_hit", ratios["cache_hit"] < p["cache_hit_min"]),
            ("shadow", ratios["shadow"] > p["shadow_max"]),
        )
        if bad
    ]
    figures: dict[str, object] = {name: f"{value:.1%}" for name, value in ratios.items()}
    figures["breaches"] = breaches
    figures["_limits"] = {
        "effective": f"≥ {p['effective_min']:.0%}",
        "waste": f"≤ {p['waste_max']:.0%}",
        "cache_hit": f"≥ {p['cache_hit_min']:.0%}",
        "shadow": f"≤ {p['shadow_max']:.0%}",
    }
    return DetectionResult(firing=bool(breaches), figures=figures)
