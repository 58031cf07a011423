"""Detectors over budgets and the health ratios."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.alerts.detectors.registry import DetectionResult, Params, register_detector
from apps.classification.health import RATIOS, Ratios, Thresholds, ratios_of


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
    by_class: dict[str, int]  # classified tokens in the window, by class
    prompt: int
    prompt_cached: int
    thresholds: Thresholds  # the business line's (the one thresholds table)
    # Tokens by reason (waste.timeout, shadow.spec_rejected, ...) of the waste and shadow classes.
    by_reason: dict[str, int] = field(default_factory=dict)


@register_detector("health", source="health_series", defaults={"window_hours": 24, "min_tokens": 100_000})
def health(series: HealthInput, p: Params) -> DetectionResult:
    """The four health ratios (apps/classification/health.py) against the business line's
    thresholds (the seeds': effective >= 75 %, waste <= 15 %, shadow <= 8 % of the computed
    tokens, cache hit >= 60 % of the prompt). Fires when any is out of range over the window
    (with enough tokens), naming the top reasons of the waste and shadow it found."""
    if sum(series.by_class.values()) < p["min_tokens"]:
        return DetectionResult(firing=False)
    ratios = ratios_of(by_class=series.by_class, prompt=series.prompt, prompt_cached=series.prompt_cached)
    breaches = series.thresholds.breaches(ratios)
    shown = {name: ratios.get(name) for name, _, _ in RATIOS}
    figures: dict[str, object] = {name: f"{value:.1%}" for name, value in shown.items() if value is not None}
    figures["breaches"] = breaches
    reasons = top_reasons(series, ratios, breaches)
    if reasons:
        figures["reasons"] = reasons
    figures["_limits"] = {
        name: f"{'≥' if bound == 'min' else '≤'} {series.thresholds.limit(name):.0%}" for name, _, bound in RATIOS
    }
    return DetectionResult(firing=bool(breaches), figures=figures)


def top_reasons(series: HealthInput, ratios: Ratios, breaches: list[str], top: int = 3) -> list[dict[str, Any]]:
    """What on-call asks first: which waste (timeouts? duplicates?) or shadow it is. For the
    waste rate and shadow ratio out of range (both when the effective ratio is low), the class's
    share of the computed tokens and its `top` reasons with their shares of the class."""
    named = [c for c in ("waste", "shadow") if c in breaches or ("effective" in breaches and series.by_class.get(c))]
    found = []
    for token_class in named:
        total = series.by_class.get(token_class, 0)
        of_class = [(n.split(".", 1)[1], t) for n, t in series.by_reason.items() if n.startswith(f"{token_class}.")]
        reasons = sorted(of_class, key=lambda item: (-item[1], item[0]))
        shares = [{"reason": name, "share": round(tokens / total, 4)} for name, tokens in reasons[:top] if tokens > 0]
        found.append({"class": token_class, "share": round(ratios.get(token_class) or 0.0, 4), "top": shares})
    return found
