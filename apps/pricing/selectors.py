"""Reads of pricing: the price book, a model's price basis, unpriced models, costs, and tokens with
their cost per class and reason (the class rollup beside the cost rollup: pricing reads both)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max, Min, Sum
from django.utils import timezone

from apps.accounts.models import CollectorKey
from apps.classification.engine import COMPONENT_KIND, COMPONENTS
from apps.classification.models import HourlyClass, Reason
from apps.common.buckets import hour_floor, zone_name
from apps.common.composed import SQL, Composable, Identifier, Literal, col, commas, table, text
from apps.common.replica import read_connection
from apps.ingest.models import ServedModel
from apps.ingest.queries import dims_join, rollup_where
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
    hour = hour_floor(at)
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
class PoolHourRate:
    """What a pool's hour cost its tokens: the hour's allocated cost over its compute-weighted
    tokens. The pricing job split the same allocated cost among the hour's rows in proportion to
    the same weights (book.allocate), so the tokens of a record cost weight x rate, and the
    records of a row add up to what the row was allocated (to the cent it was rounded to)."""

    pool: PoolTerms
    hour: datetime
    allocated: Decimal
    weighted_tokens: Decimal

    @property
    def per_million(self) -> Decimal | None:
        """Per million compute-weighted tokens; None for an hour nothing used."""
        return self.allocated * 1_000_000 / self.weighted_tokens if self.weighted_tokens else None

    def cost(self, component: int, tokens: int) -> Decimal:
        if not self.weighted_tokens:
            return Decimal(0)
        return tokens * self.pool.weight(component) * self.allocated / self.weighted_tokens


def pool_hour_rate(*, pool: CostPool, at: datetime) -> PoolHourRate | None:
    """The rate of `pool` in the hour holding `at`; None while that hour is not allocated yet (a
    pool-hour is priced once it has ended, plus POOL_GRACE_MINUTES, at the next pricing run)."""
    hour = hour_floor(at)
    found = PoolIdleHour.objects.filter(pool=pool, hour=hour).values_list("allocated", "weighted_tokens").first()
    if found is None:
        return None
    return PoolHourRate(pool_terms(pool=pool), hour, found[0], found[1])


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


# --- tokens and cost per class and reason ----------------------------------------------------

# group_by names and their SQL over: c (a class or cost rollup row), r (reason), m (model), k (source).
CLASS_GROUPS: dict[str, Composable] = {
    "class": SQL("split_part(r.name, '.', 1)"),
    "reason": col("r", "name"),
    "component": col("c", "component"),
    "model": col("m", "name"),
    "model_version": col("m", "version"),
    "source": col("k", "name"),
}
_GROUPED = SQL(
    "SELECT {columns} FROM {rollup} c JOIN {reasons} r ON r.id = c.reason_id JOIN {models} m ON m.id = c.model_id "
    "JOIN {keys} k ON k.id = c.source_id {dims} WHERE {where} GROUP BY {groups}"
)
# The measures class_usage sums, over the class rollup (tokens) and the cost rollup (tokens and cost).
_TOKENS = SQL("sum(c.tokens)::bigint")
_TOKENS_COST = SQL("sum(c.tokens)::bigint, sum(c.cost)")


def _grouped(
    table_name: str,
    measure: Composable,
    *,
    start: datetime,
    end: datetime,
    granularity: str,
    group_by: list[str],
    dims: dict[str, str] | None,
    extra: tuple[str, ...] = (),
    business_lines: list[str] | None = None,
) -> list[tuple[Any, ...]]:
    # Days and months of the accounting zone (hours are the same in every whole-hour zone).
    select: list[Composable] = [SQL("date_trunc({}, c.hour, %s)").format(Literal(granularity))]
    params: list[Any] = [zone_name()]
    for name in group_by:
        if name in CLASS_GROUPS:
            select.append(CLASS_GROUPS[name])
        else:
            select.append(SQL("coalesce(d.dims ->> %s, '')"))
            params.append(name)
    select += [col("c", column) for column in extra]
    where, where_params = rollup_where(alias="c", start=start, end=end, dims=dims, business_lines=business_lines)
    params += where_params
    sql = _GROUPED.format(
        columns=commas([*select, measure]),
        rollup=Identifier(table_name),
        reasons=table(Reason),
        models=table(ServedModel),
        keys=table(CollectorKey),
        dims=dims_join("c"),
        where=where,
        groups=SQL(", ").join(Literal(i) for i in range(1, len(select) + 1)),
    )
    with read_connection().cursor() as cursor:
        cursor.execute(text(sql), params)
        return cursor.fetchall()


def class_usage(
    *,
    start: datetime,
    end: datetime,
    granularity: str,
    group_by: list[str],
    dims: dict[str, str] | None = None,
    business_lines: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Tokens per period and group (class, reason, component, model, source or a rollup dim),
    with their cost per currency where priced; only of `business_lines` when given. Tokens not
    yet (or never) priced are counted in `unpriced_tokens`, never as a cost of 0."""

    def grouped(table_name: str, measure: Composable, extra: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
        return _grouped(
            table_name,
            measure,
            start=start,
            end=end,
            granularity=granularity,
            group_by=group_by,
            dims=dims,
            extra=extra,
            business_lines=business_lines,
        )

    width = 1 + len(group_by)
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for found in grouped(HourlyClass._meta.db_table, _TOKENS):
        rows[found[:width]] = {"tokens": int(found[width]), "cost": defaultdict(Decimal), "priced_tokens": 0}
    for found in grouped(HourlyCost._meta.db_table, _TOKENS_COST, ("currency",)):
        currency, priced, cost = found[width:]
        row = rows.setdefault(found[:width], {"tokens": 0, "cost": defaultdict(Decimal), "priced_tokens": 0})
        row["cost"][currency] += cost
        row["priced_tokens"] += int(priced)
    names = ["period", *group_by]
    result = []
    for key in sorted(rows, key=lambda k: tuple(str(v) for v in k)):
        row = rows[key]
        labels = dict(zip(names, key, strict=True))
        if "component" in labels:
            labels["kind"] = COMPONENT_KIND[labels["component"]]
            labels["component"] = COMPONENTS[labels["component"]]
        result.append(
            {
                **labels,
                "tokens": row["tokens"],
                "cost": {currency: amount.quantize(Decimal("0.000001")) for currency, amount in row["cost"].items()},
                "unpriced_tokens": max(row["tokens"] - row["priced_tokens"], 0),
            }
        )
    return result
