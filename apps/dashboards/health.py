"""The overview's four health cards: each ratio (apps/classification/health.py, the definition
every surface reads) against the thresholds of the business line shown (the one thresholds
table, which the health alert, the audit and the month-end checks read too)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from apps.classification.health import RATIOS, Thresholds, thresholds_for
from apps.dashboards.selectors import Health

# Per ratio: its label, the name of its headline figure (data-figure) and the class to drill into.
SHOWN = {
    "effective": (_("Effective ratio"), "effective_ratio", "effective"),
    "waste": (_("Waste rate"), "waste_rate", "waste"),
    "cache_hit": (_("Cache hit rate"), "cache_hit_rate", "cache"),
    "shadow": (_("Shadow ratio"), "shadow_ratio", "shadow"),
}


def thresholds_shown(*, dims: dict[str, str], lines: list[str] | None) -> Thresholds:
    """The thresholds of the one business line the page shows (chosen in the filters, or the
    reader's only line), else the defaults of every line."""
    chosen = dims.get("business_line") or (lines[0] if lines is not None and len(lines) == 1 else "")
    return thresholds_for(chosen)


def metric_states(found: Health, thresholds: Thresholds) -> list[dict[str, Any]]:
    """Each metric's value, threshold and state: ok, breach, or none without tokens."""
    ratios = found.ratios
    states = []
    for name, _field, bound in RATIOS:
        label, figure, drill = SHOWN[name]
        value = ratios.get(name)
        states.append(
            {
                "name": name,
                "label": label,
                "figure": figure,
                "value": value,
                "limit": float(thresholds.limit(name)),
                "bound": bound,
                "state": thresholds.state(name, value),
                "drill": drill,
            }
        )
    return states
