"""Reads of pricing: the price book, a model's price basis, unpriced models, costs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count, Max, Min, Sum
from django.utils import timezone

from apps.pricing.book import PoolTerms, PriceBook, VersionTerms
from apps.pricing.models import MINOR_UNITS, CostPool, HourlyCost, PoolIdleHour, Price, PriceVersion, UnpricedHour


def price_book_load() -> PriceBook:
    """Every price version and cost pool (a few rows), ready for lookups."""
    prices: dict[int, list[tuple[str, str, Decimal]]] = {}
    for version_id, pattern, kind, per_million in Price.objects.values_list(
        "version_id", "model_pattern", "kind", "per_million"
    ):
        prices.setdefault(version_id, []).append((pattern, kind, per_million))
    versions = [
        VersionTerms(v.pk, v.effective_from, v.currency, tuple(prices.get(v.pk, ())))
        for v in PriceVersion.objects.all()
    ]
    return PriceBook(versions, [pool_terms(pool=p) for p in CostPool.objects.all()])


def pool_terms(*, pool: CostPool) -> PoolTerms:
    return PoolTerms(
        id=pool.pk,
        name=pool.name,
        currency=pool.currency,
        places=MINOR_UNITS[pool.currency],  # type: ignore[index]
        gpus=pool.gpus,
        cost_per_gpu_hour=pool.cost_per_gpu_hour,
        capacity=pool.capacity,
        w_uncached_prompt=pool.w_uncached_prompt,
        w_cached_prompt=pool.w_cached_prompt,
        w_output=pool.w_output,
        patterns=tuple(pool.model_patterns),
        effective_from=pool.effective_from,
        effective_to=pool.effective_to,
    )


@dataclass(frozen=True)
class PriceBasis:
    """What prices a model at a time: a cost pool, or a price version and its prices."""

    pool: CostPool | None
    version: PriceVersion | None
    prices: dict[str, Decimal]  # per million, by kind; empty for a pool
    currency: str


def price_basis(*, model_name: str, at: datetime) -> PriceBasis | None:
    """The pool or price version that prices `model_name` in the hour holding `at` (the same
    lookup the pricing job makes, so a record's basis is that of its hourly row once priced);
    None when the model is unpriced then."""
    hour = at.replace(minute=0, second=0, microsecond=0)
    basis = price_book_load().basis(model_name, hour)
    if basis is None:
        return None
    if basis.pool is not None:
        pool = CostPool.objects.get(pk=basis.pool.id)
        return PriceBasis(pool=pool, version=None, prices={}, currency=pool.currency)
    assert basis.version is not None
    version = PriceVersion.objects.get(pk=basis.version.id)
    return PriceBasis(pool=None, version=version, prices=dict(basis.prices), currency=version.currency)


@dataclass(frozen=True)
class UnpricedModel:
    model: str  # name@version, as ServedModel prints it
    model_name: str
    kinds: tuple[str, ...]
    tokens: int
    first_hour: datetime
    last_hour: datetime


def unpriced_models(*, start: datetime, end: datetime) -> list[UnpricedModel]:
    """Models with tokens in [start, end) that neither a price nor a pool covered when their
    hours were priced (the pricing job records them; their cost rows are absent, not 0)."""
    rows = (
        UnpricedHour.objects.filter(hour__gte=start, hour__lt=end)
        .values("model_id", "model__name", "model__version", "kind")
        .annotate(tokens=Sum("tokens"), first=Min("hour"), last=Max("hour"))
        .order_by("model__name", "model__version", "kind")
    )
    found: dict[int, UnpricedModel] = {}
    for row in rows:
        name, version = row["model__name"], row["model__version"]
        seen = found.get(row["model_id"])
        found[row["model_id"]] = UnpricedModel(
            model=f"{name}@{version}" if version else name,
            model_name=name,
            kinds=(*seen.kinds, row["kind"]) if seen else (row["kind"],),
            tokens=(seen.tokens if seen else 0) + row["tokens"],
            first_hour=min(seen.first_hour, row["first"]) if seen else row["first"],
            last_hour=max(seen.last_hour, row["last"]) if seen else row["last"],
        )
    return list(found.values())


UNPRICED_LOOKBACK = timedelta(days=30)


def unpriced_models_recent() -> list[UnpricedModel]:
    """Unpriced models of the last 30 days (for the system check and the admin banner)."""
    now = timezone.now()
    return unpriced_models(start=now - UNPRICED_LOOKBACK, end=now + timedelta(hours=1))


def unpriced_message(models: list[UnpricedModel]) -> str:
    listed = ", ".join(f"{m.model} ({m.tokens:,} tokens: {'/'.join(m.kinds)})" for m in models[:20])
    more = f" and {len(models) - 20} more" if len(models) > 20 else ""
    return f"Models with tokens but neither a price nor a cost pool: {listed}{more}. Their cost is missing, not 0."


@dataclass(frozen=True)
class ReasonCost:
    currency: str
    reason: str  # class.reason
    tokens: int
    cost: Decimal


def costs_by_reason(*, start: datetime, end: datetime) -> list[ReasonCost]:
    """Priced tokens and cost per currency and class.reason in [start, end)."""
    rows = (
        HourlyCost.objects.filter(hour__gte=start, hour__lt=end)
        .values("currency", "reason__name")
        .annotate(tokens=Sum("tokens"), cost=Sum("cost"))
        .order_by("currency", "reason__name")
    )
    return [ReasonCost(r["currency"], r["reason__name"], r["tokens"], r["cost"]) for r in rows]


@dataclass(frozen=True)
class PoolIdle:
    pool: str
    currency: str
    pool_cost: Decimal
    allocated: Decimal
    idle: Decimal
    hours: int


def pool_idle(*, start: datetime, end: datetime) -> list[PoolIdle]:
    """Per pool, the cost of its ended hours in [start, end), allocated and idle."""
    rows = (
        PoolIdleHour.objects.filter(hour__gte=start, hour__lt=end)
        .values("pool__name", "currency")
        .annotate(pool_cost=Sum("pool_cost"), allocated=Sum("allocated"), idle=Sum("idle"), hours=Count("id"))
        .order_by("pool__name")
    )
    return [
        PoolIdle(r["pool__name"], r["currency"], r["pool_cost"], r["allocated"], r["idle"], r["hours"]) for r in rows
    ]
