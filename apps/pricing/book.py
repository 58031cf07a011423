"""The price lookup and the pool allocation, as pure functions (no database).

Lookup for a model at an hour: a cost pool that serves the model then wins; otherwise the
latest price version in force, where per token kind an exact name beats a pattern and a
longer pattern beats a shorter one. A model that the version in force does not list is
unpriced for that hour: older versions are never consulted.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from fnmatch import fnmatchcase
from fractions import Fraction

from apps.classification.engine import CACHE_WRITE, CACHED, COMPONENT_KIND, OUTPUT, REASONING, STRUCTURAL

Rank = tuple[int, int]
# The optional price kinds (pricing.models.Kind.REASONING, CACHE_WRITE) and the component each prices.
REASONING_KIND = "reasoning"
CACHE_WRITE_KIND = "cache_write"
# The price kinds a component is priced at, the first the book sets: an optional kind, else the
# kind priced before the book knew it.
PRICE_KINDS: dict[int, tuple[str, ...]] = {
    REASONING: (REASONING_KIND, COMPONENT_KIND[REASONING]),
    CACHE_WRITE: (CACHE_WRITE_KIND, "input"),
}


def component_price(prices: Mapping[str, Decimal], component: int) -> Decimal | None:
    """The price per million of a component's tokens, from a model's prices by kind. Reasoning
    tokens take the reasoning price where the book sets one, else the output price (so a book
    without reasoning prices prices them as it always priced completion); prompt-cache writes
    take the cache-write price where the book sets one, else the input price."""
    for kind in PRICE_KINDS.get(component, (COMPONENT_KIND[component],)):
        if kind in prices:
            return prices[kind]
    return None


def match_rank(pattern: str, name: str) -> Rank | None:
    """How well a pattern names a model: (1, len) for the exact name, (0, len) for a matching
    glob (`*` any run of characters, `?` one), None when it does not match."""
    if "*" not in pattern and "?" not in pattern:
        return (1, len(pattern)) if pattern == name else None
    return (0, len(pattern)) if fnmatchcase(name, pattern) else None


def _best(patterns: Iterable[str], name: str) -> tuple[Rank, str] | None:
    ranked = [(rank, p) for p in patterns if (rank := match_rank(p, name)) is not None]
    # The best rank; among equal ranks the smallest pattern text, so the choice is stable.
    return min(ranked, key=lambda rp: (-rp[0][0], -rp[0][1], rp[1]), default=None)


@dataclass(frozen=True)
class VersionTerms:
    id: int
    effective_from: datetime
    currency: str
    prices: tuple[tuple[str, str, Decimal], ...]  # (model pattern, kind, per million)

    def prices_for(self, name: str) -> dict[str, Decimal]:
        """The price per million of each kind this version sets for the model."""
        found: dict[str, Decimal] = {}
        for kind in {k for _, k, _ in self.prices}:
            by_pattern = {p: v for p, k, v in self.prices if k == kind}
            best = _best(by_pattern, name)
            if best is not None:
                found[kind] = by_pattern[best[1]]
        return found


@dataclass(frozen=True)
class PoolTerms:
    id: int
    name: str
    currency: str
    places: int  # digits of the currency's smallest unit
    gpus: int
    cost_per_gpu_hour: Decimal
    capacity: int
    w_uncached_prompt: Decimal
    w_cached_prompt: Decimal
    w_output: Decimal
    patterns: tuple[str, ...]
    effective_from: datetime
    effective_to: datetime | None

    def active_at(self, at: datetime) -> bool:
        return self.effective_from <= at and (self.effective_to is None or at < self.effective_to)

    @property
    def hourly_cost(self) -> Decimal:
        """GPUs x cost per GPU-hour, rounded to the smallest currency unit (half to even)."""
        return (self.gpus * self.cost_per_gpu_hour).quantize(Decimal(1).scaleb(-self.places), ROUND_HALF_EVEN)

    def weight(self, component: int) -> Decimal:
        """Compute weight of a token of a component: cached prompt, output side (output,
        structural and reasoning: all decoded), or uncached prompt for everything prefilled
        (padding, drafts, recompute)."""
        if component == CACHED:
            return self.w_cached_prompt
        if component in (OUTPUT, STRUCTURAL, REASONING):
            return self.w_output
        return self.w_uncached_prompt


@dataclass(frozen=True)
class Basis:
    """What prices a model at an hour: a pool, or a version with its prices per kind."""

    pool: PoolTerms | None = None
    version: VersionTerms | None = None
    prices: dict[str, Decimal] = field(default_factory=dict)

    def price_of(self, component: int) -> Decimal | None:
        return component_price(self.prices, component)


class PriceBook:
    """All versions and pools, ready for lookups."""

    def __init__(self, versions: Sequence[VersionTerms], pools: Sequence[PoolTerms]) -> None:
        self.versions = sorted(versions, key=lambda v: v.effective_from)
        self._starts = [v.effective_from for v in self.versions]
        self.pools = sorted(pools, key=lambda p: p.id)
        self._memo: dict[tuple[str, int | None, tuple[int, ...]], Basis | None] = {}

    def version_at(self, at: datetime) -> VersionTerms | None:
        i = bisect.bisect_right(self._starts, at)
        return self.versions[i - 1] if i else None

    def basis(self, name: str, at: datetime) -> Basis | None:
        """The pool or version pricing `name` at `at`; None when nothing does."""
        version = self.version_at(at)
        pools = tuple(p.id for p in self.pools if p.active_at(at))
        key = (name, version.id if version else None, pools)
        if key not in self._memo:
            self._memo[key] = self._resolve(name, version, [p for p in self.pools if p.id in pools])
        return self._memo[key]

    @staticmethod
    def _resolve(name: str, version: VersionTerms | None, pools: list[PoolTerms]) -> Basis | None:
        serving = [(best[0], pool) for pool in pools if (best := _best(pool.patterns, name)) is not None]
        if serving:
            # The pool naming the model most precisely; on a tie, the oldest pool.
            return Basis(pool=min(serving, key=lambda rp: (-rp[0][0], -rp[0][1], rp[1].id))[1])
        if version is None:
            return None
        prices = version.prices_for(name)
        return Basis(version=version, prices=prices) if prices else None


@dataclass(frozen=True)
class Allocation:
    parts: list[Decimal]  # one per weight, each a whole number of smallest units
    allocated: Decimal
    idle: Decimal
    used: Decimal  # the sum of the weights
    utilisation: Decimal  # used / capacity, 6 places (may exceed 1)


def largest_remainder(total: int, weights: Sequence[Fraction]) -> list[int]:
    """Split `total` units in proportion to `weights`: each share rounded down, then the units
    left over go one each to the largest remainders (ties to the earlier weight)."""
    whole = sum(weights, Fraction(0))
    if whole == 0:
        if total:
            raise ValueError("cannot split a non-zero total by zero weights")
        return [0] * len(weights)
    quotas = [total * w / whole for w in weights]
    shares = [q.numerator // q.denominator for q in quotas]
    left = total - sum(shares)
    order = sorted(range(len(quotas)), key=lambda i: (-(quotas[i] - shares[i]), i))
    for i in order[:left]:
        shares[i] += 1
    return shares


def allocate(*, pool_cost: Decimal, weights: Sequence[Decimal], capacity: int, places: int) -> Allocation:
    """Share an hour's pool cost among rows by compute weight.

    allocated = pool_cost x min(1, used / capacity), rounded to the smallest unit (half to
    even); the parts add up to `allocated` exactly (largest remainder) and idle is the rest,
    so parts + idle = pool_cost to the smallest unit.
    """
    scale = 10**places
    units = Fraction(pool_cost) * scale
    if units.denominator != 1 or units < 0:
        raise ValueError(f"pool cost {pool_cost} is not a whole number of 10^-{places} units")
    if capacity <= 0:
        raise ValueError("capacity must be positive")
    fractions = [Fraction(w) for w in weights]
    if any(w < 0 for w in fractions):
        raise ValueError("weights must not be negative")
    used = sum(fractions, Fraction(0))
    allocated_units = round(units * min(Fraction(1), used / capacity))
    parts = largest_remainder(allocated_units, fractions)

    def money(n: int) -> Decimal:
        return Decimal(n).scaleb(-places)

    total = int(units)
    return Allocation(
        parts=[money(p) for p in parts],
        allocated=money(allocated_units),
        idle=money(total - allocated_units),
        used=sum(weights, Decimal(0)),
        utilisation=(Decimal(used.numerator) / Decimal(used.denominator) / capacity).quantize(Decimal("0.000001")),
    )


def idle_split(
    *, idle: Decimal, weights: Mapping[str, Decimal], places: int, whole: Decimal | None = None
) -> tuple[dict[str, Decimal], Decimal]:
    """Share a pool-hour's idle cost among business lines: in proportion to `weights` (their
    use of the pool that hour), or, with `whole`, each by its weight's share of `whole` (reserved
    shares out of 100 %), what the weights leave (whole - their sum) staying with the platform.

    Returns (each line's part, the platform's part), in whole smallest units of the currency:
    largest remainder over the lines in name order with the platform's rest last, so the parts
    and the platform's add up to `idle` exactly. No weight at all leaves everything to the
    platform (an hour nobody used)."""
    units = Fraction(idle) * 10**places
    if units.denominator != 1 or units < 0:
        raise ValueError(f"idle {idle} is not a whole number of 10^-{places} units")
    names = sorted(name for name, w in weights.items() if w)
    fractions = [Fraction(weights[name]) for name in names]
    if any(w < 0 for w in fractions):
        raise ValueError("weights must not be negative")
    used = sum(fractions, Fraction(0))
    rest = Fraction(0) if whole is None else Fraction(whole) - used
    if rest < 0:
        raise ValueError(f"the weights add up to {used}, more than the whole {whole}")
    if not fractions:
        return {}, idle
    *parts, platform = (Decimal(s).scaleb(-places) for s in largest_remainder(int(units), [*fractions, rest]))
    return dict(zip(names, parts, strict=True)), platform
