"""The four health metrics and their thresholds: the health alert detector's parameters (the
seeds' values, overridden by the enabled health rules for all business lines),
so the overview and the alerts judge alike."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from apps.dashboards.selectors import Health

# (ratio, label, threshold parameter, at least / at most, class to drill into)
METRICS = (
    ("effective", _("Effective ratio"), "effective_min", "min", "effective"),
    ("waste", _("Waste rate"), "waste_max", "max", "waste"),
    ("cache_hit", _("Cache hit rate"), "cache_hit_min", "min", "cache"),
    ("shadow", _("Shadow ratio"), "shadow_max", "max", "shadow"),
)


def health_thresholds() -> dict[str, Any]:
    from apps.alerts.detectors import DETECTORS
    from apps.alerts.models import Rule

    params = dict(DETECTORS["health"].defaults)
    for overrides in (
        Rule.objects.filter(detector="health", enabled=True, business_line="")
        .order_by("pk")
        .values_list("params", flat=True)
    ):
        params.update({k: v for k, v in overrides.items() if k in params})  # the newest rule's value wins
    return params


def metric_states(found: Health) -> list[dict[str, Any]]:
    """Each metric's value, threshold and state: ok, breach, or none without tokens."""
    thresholds = health_thresholds()
    states = []
    for name, label, param, bound, drill in METRICS:
        value, limit = found.ratio(name), float(thresholds[param])
        if value is None:
            state = "none"
        else:
            state = "ok" if (value >= limit if bound == "min" else value <= limit) else "breach"
        found_state = {"name": name, "label": label, "value": value, "limit": limit, "bound": bound}
        states.append({**found_state, "state": state, "drill": drill})
    return states
