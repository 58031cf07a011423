"""The four health ratios and their healthy thresholds, defined once for every surface: the
overview, the health alert, the audit and the month-end checks (docs/dashboards.md, "Ratios").

As the seeds define them, effective, waste and shadow are shares of the *computed* tokens (all
processed tokens less the cache class: what the GPUs actually computed), and the cache hit rate
is the cached prompt over the whole prompt. Cached tokens are neither effective nor wasted, so a
line that caches well can be healthy on all four at once; the seed's own example (effective
63.2 %, waste 28.7 %, shadow 12.3 %, cache hit 41.5 %) is read this way.

The thresholds (75 / 15 / 60 / 8 % by default) live in one table, HealthThreshold: its row
without a business line holds the defaults, a line's row overrides what it sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from decimal import Decimal

# The ratios in the order the pages show them: (name, threshold field, "min" or "max").
RATIOS = (
    ("effective", "effective_min", "min"),
    ("waste", "waste_max", "max"),
    ("cache_hit", "cache_hit_min", "min"),
    ("shadow", "shadow_max", "max"),
)
_BOUNDS = {name: (field, bound) for name, field, bound in RATIOS}


@dataclass(frozen=True)
class Ratios:
    """The four ratios of some tokens, each a fraction 0-1, or None without tokens to divide by."""

    effective: float | None
    waste: float | None
    cache_hit: float | None
    shadow: float | None
    computed: int  # processed tokens less the cache class
    prompt: int

    def get(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value


def ratios_of(*, by_class: Mapping[str, int], prompt: int, prompt_cached: int) -> Ratios:
    """The ratios of tokens by class (effective, waste, cache, shadow) and the prompt with its
    cached part."""
    computed = sum(tokens for name, tokens in by_class.items() if name != "cache")

    def of_computed(name: str) -> float | None:
        return by_class.get(name, 0) / computed if computed else None

    cache_hit = prompt_cached / prompt if prompt else None
    return Ratios(of_computed("effective"), of_computed("waste"), cache_hit, of_computed("shadow"), computed, prompt)


@dataclass(frozen=True)
class Thresholds:
    """The healthy range: effective and cache hit at least, waste and shadow at most."""

    effective_min: Decimal = Decimal("0.75")
    waste_max: Decimal = Decimal("0.15")
    cache_hit_min: Decimal = Decimal("0.60")
    shadow_max: Decimal = Decimal("0.08")

    def limit(self, name: str) -> Decimal:
        limit: Decimal = getattr(self, _BOUNDS[name][0])
        return limit

    def state(self, name: str, value: float | None) -> str:
        """ok, breach, or none (nothing to divide by)."""
        if value is None:
            return "none"
        bound, limit = _BOUNDS[name][1], float(self.limit(name))  # as the ratio is: 0.6 is 0.6
        return "ok" if (value >= limit if bound == "min" else value <= limit) else "breach"

    def breaches(self, ratios: Ratios) -> list[str]:
        return [name for name, _, _ in RATIOS if self.state(name, ratios.get(name)) == "breach"]


SEEDS = Thresholds()


@dataclass(frozen=True)
class ThresholdTable:
    """The thresholds of every business line, from one read of the table."""

    default: Thresholds
    by_line: dict[str, Thresholds]

    def of(self, business_line: str = "") -> Thresholds:
        return self.by_line.get(business_line, self.default)


def _overridden(base: Thresholds, row: object) -> Thresholds:
    found = {f.name: getattr(row, f.name) for f in fields(Thresholds) if getattr(row, f.name) is not None}
    return replace(base, **found)


def threshold_table() -> ThresholdTable:
    """The defaults (the row without a business line, else the seeds') and each line's overrides."""
    from apps.classification.models import HealthThreshold

    rows = list(HealthThreshold.objects.all())
    default = SEEDS
    for row in rows:
        if not row.business_line:
            default = _overridden(SEEDS, row)
    return ThresholdTable(default, {r.business_line: _overridden(default, r) for r in rows if r.business_line})


def thresholds_for(business_line: str = "") -> Thresholds:
    """The thresholds of one business line ("" for the company as a whole: the defaults)."""
    return threshold_table().of(business_line)
