"""Reads of the dashboards from the rollups, tokens from the class rollups and money from the
cost rollups, in one grouped query each: whole days from the daily rollups (apps.dashboards.models)
where they are current, the rest of the window from the hourly ones; records only a page at a time."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction

from apps.classification.engine import CLASSES, COMPONENTS, DUPLICATE_WINDOW_SECONDS
from apps.classification.health import Ratios, ratios_of
from apps.classification.models import HourlyClass, Reason, RuleSet
from apps.common.buckets import hour_floor, utc_days, zone_name
from apps.common.composed import SQL, Composable, text
from apps.common.replica import read_connection
from apps.dashboards.filters import Filters
from apps.dashboards.models import DailyClass, DailyCost, DailyLineClass, DailyLineCost, HourlyLineClass
from apps.dashboards.queries import (
    Grouping,
    Match,
    RollupPart,
    RollupQuery,
    by_conversation_query,
    dim_values,
    duplicates_query,
    record_components_query,
)
from apps.dashboards.rollup import day_runs, split_window
from apps.ingest.models import DimSet, Record, ServedModel
from apps.ingest.services import record_key
from apps.pricing.models import HourlyCost
from apps.pricing.selectors import PoolHourRate

# The two rollups a page sums, each as (daily by business line, daily by dim set, hourly).
CLASS = (DailyLineClass._meta.db_table, DailyClass._meta.db_table, HourlyClass._meta.db_table)
COST = (DailyLineCost._meta.db_table, DailyCost._meta.db_table, HourlyCost._meta.db_table)
# The class rollup by business line and hour, for the built hours (drawn by the hour).
HOURLY_LINE = HourlyLineClass._meta.db_table
# What the daily rows by business line can group by (any filter but a dim other than the line).
LINE_GROUPS = {"period", "component", "currency", "class", "reason", "model", "business_line"}


def _reason_ids(flt: Filters) -> list[int] | None:
    """The reason ids the class or reason filter keeps (None: no such filter)."""
    if flt.reason:
        return list(Reason.objects.filter(name=flt.reason).values_list("id", flat=True))
    if flt.token_class:
        return list(Reason.objects.filter(name__startswith=flt.token_class + ".").values_list("id", flat=True))
    return None


def _sums(
    rollup: tuple[str, str, str], measures: list[str], sets: list[list[str]], flt: Filters, lines: list[str] | None
) -> list[list[tuple]]:
    """Per entry of `sets` (a list of group names), rows of (*groups, *measures) over the
    window, all from one query per rollup: whole days not stale from the daily rollup, the
    rest from the hourly one. Groups are "class", "reason", "model", "period", "component",
    "currency" or a rollup dim; class, reason and model come back as names."""
    names = list(dict.fromkeys(name for groups in sets for name in groups))
    query = _sums_query(rollup, measures, sets, flt, lines)
    if query is None:
        return [[] for _ in sets]
    rows = _fetch(*query)
    width = len(names)
    found_sets = []
    for groups in sets:
        positions = [names.index(n) for n in groups]
        mask = 0 if len(sets) == 1 else sum(1 << (width - 1 - i) for i in range(width) if i not in positions)
        mine = [(*(row[i] for i in positions), *row[width + 1 :]) for row in rows if row[width] == mask]
        found_sets.append(_named(mine, groups, len(measures)))
    return found_sets


def _fetch(sql: str | Composable, params: list[Any]) -> list[tuple]:
    """The rows of one rollup read, without JIT: a read of two days' hourly rows costs enough for
    PostgreSQL to compile it with LLVM, which took longer (200 ms on a loaded machine) than the
    read itself."""
    connection = read_connection()
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql if isinstance(sql, str) else text(sql), params)
        return cursor.fetchall()


def _sums_query(
    rollup: tuple[str, str, str], measures: list[str], sets: list[list[str]], flt: Filters, lines: list[str] | None
) -> tuple[str, list[Any]] | None:
    """The one query of _sums: columns g0, g1, ... (the group names in order of first use),
    the grouping set of the row, the measures; None when the filters match nothing."""
    reasons = _reason_ids(flt)
    models = list(ServedModel.objects.filter(name=flt.model).values_list("id", flat=True)) if flt.model else None
    if (reasons is not None and not reasons) or (models is not None and not models):
        return None
    grouping = Grouping(tuple(tuple(groups) for groups in sets), tuple(measures))
    names = grouping.names
    by_line = set(names) <= LINE_GROUPS and set(flt.dims) <= {"business_line"}
    window = split_window(flt.start, flt.end)
    # Drawn by the hour, or by accounting days that are not UTC days: only hourly rows have the
    # hours (the daily rows hold UTC days; totals still read them, the window splits exactly).
    parts: list[RollupPart]
    if "period" in names and (flt.granularity != "day" or not utc_days()):
        if by_line and rollup is CLASS:
            parts = [RollupPart(HOURLY_LINE, "hour", True, tuple(window.built))]
            parts.append(RollupPart(rollup[2], "hour", False, tuple(window.hourly)))
        else:
            parts = [RollupPart(rollup[2], "hour", False, ((flt.start, flt.end),))]
    else:
        daily = rollup[0] if by_line else rollup[1]
        parts = [RollupPart(daily, "day", True, tuple(day_runs(window.days)))]
        parts.append(RollupPart(rollup[2], "hour", False, tuple(window.hourly)))
    match = Match(
        granularity=flt.granularity,
        zone=zone_name(),
        utc_days=utc_days(),
        dims=tuple(flt.dims.items()),
        lines=None if lines is None else tuple(lines),
        reasons=None if reasons is None else tuple(reasons),
        models=None if models is None else tuple(models),
    )
    return RollupQuery(grouping, match, tuple(parts)).statement_text()


def _sum(
    rollup: tuple[str, str, str], measures: list[str], groups: list[str], flt: Filters, lines: list[str] | None
) -> list[tuple]:
    """Rows of (*groups, *measures): _sums of one set."""
    return _sums(rollup, measures, [groups], flt, lines)[0]


def _named(rows: list[tuple], groups: list[str], measures: int) -> list[tuple]:
    """The rows with reason and model ids turned into names, summed again per named group."""
    width = len(groups)
    reason_names: dict[int, str] = {}
    model_names: dict[int, str] = {}
    if {"class", "reason"} & set(groups):
        reason_names = dict(Reason.objects.values_list("id", "name"))
    if "model" in groups:
        position = groups.index("model")
        ids = {row[position] for row in rows}
        model_names = dict(ServedModel.objects.filter(id__in=ids).values_list("id", "name"))
    summed: dict[tuple, list[Any]] = {}
    for row in rows:
        key = []
        for name, value in zip(groups, row[:width], strict=True):
            if name == "class":
                value = reason_names.get(value, "?").split(".", 1)[0]
            elif name == "reason":
                value = reason_names.get(value, "?")
            elif name == "model":
                value = model_names.get(value, "?")
            key.append(value)
        found = summed.get(tuple(key))
        if found is None:
            summed[tuple(key)] = list(row[width:])
        else:
            for i, value in enumerate(row[width:]):
                found[i] = (found[i] or 0) + (value or 0)
    return [(*key, *values) for key, values in summed.items()]


@dataclass(frozen=True)
class Health:
    total: int
    by_class: dict[str, int]
    prompt: int
    prompt_cached: int
    prompt_cache_write: int = 0  # the part of the prompt written to a provider's prompt cache

    @property
    def ratios(self) -> Ratios:
        """The four health ratios, as apps/classification/health.py defines them for every surface."""
        return ratios_of(by_class=self.by_class, prompt=self.prompt, prompt_cached=self.prompt_cached)


def health(*, flt: Filters, lines: list[str] | None) -> Health:
    """Tokens per class, and the prompt with its cached and cache-written parts (the prompt
    components), in the window."""
    return _health_of(_sum(CLASS, ["tokens"], ["class", "component"], flt, lines))


def _health_of(rows: list[tuple]) -> Health:
    by_class: dict[str, int] = defaultdict(int)
    prompt = cached = written = 0
    for token_class, component, tokens in rows:
        by_class[token_class] += tokens
        if COMPONENTS[component] in ("cached_prompt", "uncached_prompt", "cache_write"):
            prompt += tokens
            cached += tokens if COMPONENTS[component] == "cached_prompt" else 0
            written += tokens if COMPONENTS[component] == "cache_write" else 0
    return Health(sum(by_class.values()), dict(by_class), prompt, cached, written)


def class_series(*, flt: Filters, lines: list[str] | None) -> dict[str, dict[datetime, int]]:
    """Tokens per class and period (hour or day, by the window's length)."""
    return _series_of(_sum(CLASS, ["tokens"], ["period", "class"], flt, lines))


def _series_of(rows: list[tuple]) -> dict[str, dict[datetime, int]]:
    series: dict[str, dict[datetime, int]] = {name: {} for name in CLASSES}
    for period, token_class, tokens in rows:
        series.setdefault(token_class, {})[period] = tokens
    return series


@dataclass(frozen=True)
class Slice:
    """One row of a breakdown: the group's value, its tokens and (when priced) cost per currency."""

    value: str
    tokens: int
    cost: dict[str, Decimal]


def breakdown(*, flt: Filters, lines: list[str] | None, group: str, money: bool, limit: int = 100) -> list[Slice]:
    """Tokens (and cost, when `money`) per value of `group`, largest first."""
    tokens = _sum(CLASS, ["tokens"], [group], flt, lines)
    costs = _sum(COST, ["cost"], [group, "currency"], flt, lines) if money else []
    return _slices_of(tokens, costs, limit)


def _slices_of(tokens: list[tuple], costs: list[tuple], limit: int) -> list[Slice]:
    cost: dict[str, dict[str, Decimal]] = defaultdict(dict)
    for value, currency, amount in costs:
        cost[value][currency] = amount
    ranked = sorted(tokens, key=lambda item: (-item[1], item[0]))[:limit]
    return [Slice(value, int(count), cost.get(value, {})) for value, count in ranked]


def spend(*, flt: Filters, lines: list[str] | None) -> dict[str, Decimal]:
    """Cost per currency of the priced tokens in the window."""
    return dict(_sum(COST, ["cost"], ["currency"], flt, lines))


@dataclass(frozen=True)
class Overview:
    health: Health
    series: dict[str, dict[datetime, int]]
    lines: list[Slice]
    spend: dict[str, Decimal]
    # Cost per class and currency of the priced tokens ({} when money is not asked for).
    class_spend: dict[str, dict[str, Decimal]] = field(default_factory=dict)


def overview(*, flt: Filters, lines: list[str] | None, money: bool, top: int = 20) -> Overview:
    """What the overview shows (health, tokens by class over time, the business lines and, when
    `money`, spend): one query over the class rollups and one over the cost rollups."""
    if flt.granularity == "day":
        found = _sums(CLASS, ["tokens"], [["class", "component"], ["business_line"], ["period", "class"]], flt, lines)
    else:  # the series by the hour from the hourly rows, the rest from the daily ones where they serve
        found = _sums(CLASS, ["tokens"], [["class", "component"], ["business_line"]], flt, lines)
        found.append(_sum(CLASS, ["tokens"], ["period", "class"], flt, lines))
    costs: list[list[tuple]] = [[], [], []]
    if money:
        costs = _sums(COST, ["cost"], [["currency"], ["business_line", "currency"], ["class", "currency"]], flt, lines)
    by_class: dict[str, dict[str, Decimal]] = defaultdict(dict)
    for name, currency, amount in costs[2]:
        by_class[name][currency] = amount
    return Overview(
        _health_of(found[0]), _series_of(found[2]), _slices_of(found[1], costs[1], top), dict(costs[0]), dict(by_class)
    )


@dataclass(frozen=True)
class Grouped:
    """The waste page grouped by one dim across reasons: each value's tokens of the measured
    class (and cost), and all its tokens, of which they are a share."""

    measured: str
    slices: list[Slice]
    totals: dict[str, int]


def grouped(*, flt: Filters, lines: list[str] | None, group: str, money: bool, limit: int = 100) -> Grouped:
    """Tokens of the chosen class (waste when none is chosen) per value of `group`, over every
    reason of it (or the chosen one), largest first; the same filters otherwise."""
    measured = replace(flt, token_class=flt.token_class or "waste", group="")
    everything = replace(flt, token_class="", reason="", group="")
    tokens = _sum(CLASS, ["tokens"], [group], measured, lines)
    costs = _sum(COST, ["cost"], [group, "currency"], measured, lines) if money else []
    totals = {value: int(count) for value, count in _sum(CLASS, ["tokens"], [group], everything, lines)}
    return Grouped(measured.token_class, _slices_of(tokens, costs, limit), totals)


@dataclass(frozen=True)
class Trend:
    """One row of the overview's top wasteful values of a dim: waste tokens in the window, in
    the window of the same length before it, and per period (for the sparkline)."""

    value: str
    tokens: int
    previous: int
    points: list[int]
    # The waste's cost per currency ({} unless money was asked for, or where nothing is priced).
    cost: dict[str, Decimal] = field(default_factory=dict)


def top_waste(
    *, flt: Filters, lines: list[str] | None, dims: list[str], money: bool = False, top: int = 5
) -> dict[str, list[Trend]]:
    """Per dim of `dims`: the `top` values with the most waste (every reason) in the window: the
    costliest when `money` (in the currency most of the waste is priced in), the most tokens
    otherwise."""
    waste = replace(flt, token_class="waste", reason="", group="")
    before = replace(waste, start=flt.start - (flt.end - flt.start), end=flt.start)
    now, earlier = _dim_sums(waste, lines, dims, by_period=True), _dim_sums(before, lines, dims, by_period=False)
    costs: dict[str, dict[str, dict[str, Decimal]]] = {dim: defaultdict(dict) for dim in dims}
    if money:
        for dim, rows in _dim_sums(waste, lines, dims, by_period=False, rollup=COST).items():
            for value, currency, amount in rows:
                costs[dim][value][currency] = amount
    found: dict[str, list[Trend]] = {}
    for dim in dims:
        previous = {value: int(count) for value, count in earlier[dim]}
        periods = sorted({period for _value, period, _count in now[dim]})
        series: dict[str, dict[datetime, int]] = defaultdict(dict)
        for value, period, count in now[dim]:
            series[value][period] = int(count)
        first = _first_currency(costs[dim].values())
        ranked = sorted(
            series.items(),
            key=lambda item: (-costs[dim].get(item[0], {}).get(first, 0), -sum(item[1].values()), item[0]),
        )
        found[dim] = [
            Trend(
                value,
                sum(points.values()),
                previous.get(value, 0),
                [points.get(p, 0) for p in periods],
                dict(costs[dim].get(value, {})),
            )
            for value, points in ranked[:top]
            if sum(points.values())
        ]
    return found


def _first_currency(costs: Any) -> str:
    """The currency that holds the most of `costs` (dicts of currency: amount), "" when none."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for cost in costs:
        for currency, amount in cost.items():
            totals[currency] += amount or 0
    return max(sorted(totals), key=lambda c: totals[c], default="")


def _dim_sums(
    flt: Filters, lines: list[str] | None, dims: list[str], *, by_period: bool, rollup: tuple[str, str, str] = CLASS
) -> dict[str, list[tuple]]:
    """Per dim of `dims`, rows of (value, period if `by_period`, tokens) of the class rollup in the
    window, or of (value, currency, cost) of the cost rollup, in one query: summed by rollup dim
    set first, then each of the few dim sets read for its values (reading a dim from the dim set
    of every rollup row costs several times the sum)."""
    measure = "cost" if rollup is COST else "tokens"
    extra = "period" if by_period else "currency" if rollup is COST else ""
    groups = ["dims_id", extra] if extra else ["dims_id"]
    query = _sums_query(rollup, [measure], [groups], flt, lines)
    if query is None:
        return {dim: [] for dim in dims}
    inner, params = query
    sql = dim_values(SQL(inner), measure=measure, extra=extra or None)
    rows = _fetch(sql, [*params, list(dims)])
    found: dict[str, list[tuple]] = {dim: [] for dim in dims}
    for dim, *row in rows:
        found[dim].append(tuple(row))
    return found


@dataclass(frozen=True)
class Duplicate:
    """A request the duplicate rule classified as waste, and the earlier one it repeats."""

    record: Record
    original: Record


def duplicates(
    *, flt: Filters, lines: list[str] | None, prompt_hash: bytes | None = None, limit: int = 50
) -> list[Duplicate]:
    """The newest duplicates in the window (of one prompt hash when given), each with its original."""
    where: list[Composable] = []
    params: list[Any] = [DUPLICATE_WINDOW_SECONDS, flt.start, flt.end]
    if prompt_hash is not None:
        where.append(SQL("r.prompt_hash = %s"))
        params.append(prompt_hash)
    if flt.model:
        where.append(SQL("r.model_id = ANY(%s)"))
        params.append(list(ServedModel.objects.filter(name=flt.model).values_list("id", flat=True)))
    if flt.dims:
        where.append(SQL("d.dims @> %s::jsonb"))
        params.append(json.dumps(flt.dims))
    if lines is not None:
        where.append(SQL("d.business_line = ANY(%s)"))
        params.append(lines)
    with read_connection().cursor() as cursor:
        cursor.execute(text(duplicates_query(where)), [*params, limit])
        pairs = cursor.fetchall()
    keys = {key for row in pairs for key in (row[:3], row[3:])}
    found = {r.pk: r for r in Record.objects.select_related("model", "dims", "source").filter(pk__in=list(keys))}
    return [Duplicate(found[tuple(row[:3])], found[tuple(row[3:])]) for row in pairs]


def original_of(*, record: Record) -> Record | None:
    """The earlier request `record` repeats under the duplicate rule, or None."""
    if record.status != 0 or record.prompt_hash is None:
        return None
    return (
        Record.objects.select_related("model", "dims", "source")
        .filter(
            prompt_hash=record.prompt_hash,
            source_id=record.source_id,
            model__name=record.model.name,
            status=0,
            dims__business_line=record.dims.business_line,
            ts__lt=record.ts,
            ts__gte=record.ts - timedelta(seconds=DUPLICATE_WINDOW_SECONDS),
        )
        .order_by("-ts")
        .first()
    )


@dataclass(frozen=True)
class Component:
    name: str  # engine.COMPONENTS
    tokens: int
    reason: str
    cost: Decimal | None  # None: unpriced, or a pool's hour not priced yet


@dataclass(frozen=True)
class Components:
    ruleset: RuleSet
    rows: list[Component]
    currency: str
    pool: str = ""  # the cost pool that prices the record's model, if one does
    pool_rate: PoolHourRate | None = None  # its hour's rate; None while the hour is not priced

    @property
    def cost(self) -> Decimal | None:
        """The record's cost, when every component has one."""
        costs = [c.cost for c in self.rows if c.tokens]
        known = [c for c in costs if c is not None]
        return sum(known, Decimal(0)) if known and len(known) == len(costs) else None


def record_components(*, record: Record) -> Components:
    """Each token component of `record` with its class.reason under the rule set its hour was
    classified with (the active one if its hour holds none), decided by the same SQL as
    reclassification (the duplicate window and the move rules included), and its cost at the
    model's prices of that hour, or at its pool's rate for that hour (the rate the hour's rows
    were allocated at; no cost while the hour is not priced)."""
    from apps.classification.services import active_ruleset, ruleset_compiled
    from apps.classification.sql import COMPONENT_TOKENS, records_sql
    from apps.pricing.selectors import pool_hour_rate, price_basis

    ruleset = _hour_ruleset(record) or active_ruleset()
    compiled = ruleset_compiled(ruleset)
    inner, params = records_sql(start=record.ts, end=record.ts + timedelta(microseconds=1), flags=compiled.flags)
    # records_sql has no record key: the record is its (ts, source, model, rollup dims, tokens);
    # two records alike in all of these differ at most by a move rule on a dim not rolled up.
    sql = text(record_components_query(inner, compiled.reasons, COMPONENT_TOKENS))
    rollup_dims = record.dims.rollup_id or record.dims_id
    keys = [record.ts, record.source_id, record.model_id, rollup_dims, record.prompt, record.completion]
    keys.append(record.reasoning)
    with read_connection().cursor() as cursor:
        cursor.execute(sql, [*params, *keys])
        row = cursor.fetchone()
    width = len(COMPONENTS)
    names = dict(Reason.objects.values_list("id", "name"))
    basis = price_basis(model_name=record.model.name, at=record.ts)
    prices = basis.prices if basis is not None else {}
    rate = pool_hour_rate(pool=basis.pool, at=record.ts) if basis is not None and basis.pool is not None else None
    rows = [
        Component(name, int(tokens), names.get(reason_id, "?"), _component_cost(prices, rate, i, int(tokens)))
        for i, (name, reason_id, tokens) in enumerate(zip(COMPONENTS, row[:width], row[width:], strict=True))
    ]
    if basis is None:
        return Components(ruleset, rows, "")
    return Components(ruleset, rows, basis.currency, basis.pool.name if basis.pool else "", rate)


def _component_cost(
    prices: dict[str, Decimal], rate: PoolHourRate | None, component: int, tokens: int
) -> Decimal | None:
    """At the pool's rate for the hour when a pool prices the model, else at its price per million."""
    from apps.pricing.book import component_price

    if rate is not None:
        return rate.cost(component, tokens)
    price = component_price(prices, component)
    return None if price is None else price * tokens / Decimal(1_000_000)


def _hour_ruleset(record: Record) -> RuleSet | None:
    hour = hour_floor(record.ts)
    rows = HourlyClass.objects.filter(
        hour=hour, source_id=record.source_id, model_id=record.model_id, dims_id=record.dims.rollup_id or record.dims_id
    )
    found = rows.order_by("-ruleset_id").values_list("ruleset_id", flat=True).first()
    return RuleSet.objects.filter(pk=found).first() if found is not None else None


# A retry chain and a conversation are read around a record: a day either side of it.
AROUND = timedelta(days=1)
CONVERSATION_DIM = "conversation_id"


def retry_chain(*, record: Record, lines: list[str] | None, limit: int = 20) -> list[Record]:
    """The attempts of `record`'s request in order: what it retries (retry_of, back to the first
    attempt) and what retries it, within a day of it, of the reader's lines."""
    near = Record.objects.select_related("model", "dims", "source").filter(
        ts__gte=record.ts - AROUND, ts__lt=record.ts + AROUND, source_id=record.source_id
    )
    if lines is not None:
        near = near.filter(dims__business_line__in=lines)
    chain, seen = [record], {record.record_id}
    earlier = record.retry_of
    while earlier and earlier not in seen and len(chain) < limit:
        # Its key, with the source and ts, is what the records' primary key holds.
        found = near.filter(record_key=record_key(earlier), record_id=earlier).first()
        if found is None:
            break
        chain.insert(0, found)
        seen.add(found.record_id)
        earlier = found.retry_of
    later = record.record_id
    while len(chain) < limit:  # through the index of the records that retry one (ingest_record_retry_of)
        found = near.filter(retry_of=later).exclude(record_id__in=seen).order_by("ts").first()
        if found is None:
            break
        chain.append(found)
        seen.add(found.record_id)
        later = found.record_id
    return chain if len(chain) > 1 else []


def conversation(*, flt: Filters, lines: list[str] | None, conversation_id: str, limit: int = 200) -> list[Record]:
    """The requests of one conversation in the window, oldest first (where agent loops show)."""
    sets = DimSet.objects.filter(dims__contains={CONVERSATION_DIM: conversation_id})
    if lines is not None:
        sets = sets.filter(business_line__in=lines)
    ids = list(sets.values_list("id", flat=True))
    return list(
        Record.objects.select_related("model", "dims", "source")
        .filter(ts__gte=flt.start, ts__lt=flt.end, dims_id__in=ids)
        .order_by("ts", "source_id", "record_key")[:limit]
    )


# Conversations are not rolled up (a dim of the records alone): grouping by them classifies the
# records of at most this much of the window, its end, with the SQL of reclassification.
CONVERSATION_WINDOW = timedelta(days=7)


def by_conversation(*, flt: Filters, lines: list[str] | None, limit: int = 100) -> Grouped:
    """Tokens of the chosen class (waste when none) per conversation, classified per record
    under the active rule set, largest first; tokens only (the records carry no cost)."""
    from apps.classification.services import active_ruleset, ruleset_compiled
    from apps.classification.sql import COMPONENT_TOKENS, records_sql

    measured = replace(flt, token_class=flt.token_class or "waste", group="")
    kept = _reason_ids(measured) or []
    start = max(flt.start, flt.end - CONVERSATION_WINDOW)
    compiled = ruleset_compiled(active_ruleset())
    # records_sql computes its flags per record over the records and their dim sets: these three
    # columns ride along (the reason expressions read only the rule set's own flags).
    extra: list[tuple[str, tuple[Composable, list[object]]]] = [
        ("conversation", (SQL("d.dims ->> %s"), [CONVERSATION_DIM])),
        ("line_of", (SQL("d.business_line"), [])),
        ("dims_match", (SQL("d.dims @> %s::jsonb"), [json.dumps(flt.dims)])),
    ]
    inner, params = records_sql(start=start, end=flt.end, flags=[*compiled.flags, *extra])
    where: list[Composable] = [SQL("x.ts >= %s"), SQL("x.conversation IS NOT NULL"), SQL("x.dims_match")]
    more: list[Any] = [start]
    if lines is not None:
        where.append(SQL("x.line_of = ANY(%s)"))
        more.append(lines)
    if flt.model:
        where.append(SQL("x.model_id = ANY(%s)"))
        more.append(list(ServedModel.objects.filter(name=flt.model).values_list("id", flat=True)))
    sql = text(by_conversation_query(inner, compiled.reasons, COMPONENT_TOKENS, where))
    with read_connection().cursor() as cursor:
        per_component = [kept] * len(COMPONENT_TOKENS)
        cursor.execute(sql, [*per_component, *params, *more, *per_component, limit])
        rows = cursor.fetchall()
    slices = [Slice(value, int(count), {}) for value, count, _total in rows]
    return Grouped(measured.token_class, slices, {value: int(total) for value, _count, total in rows})


def records_exist(*, lines: list[str] | None) -> bool:
    """Whether any record of these lines (all lines: None) was ever received: an empty page then
    says to widen the window, not to set up a collector."""
    found = Record.objects.all()
    if lines is not None:
        found = found.filter(dims__business_line__in=lines)
    return found.exists()


@dataclass(frozen=True)
class RecordCost:
    amount: Decimal | None  # None: unpriced, or its pool's hour not allocated yet
    currency: str


def records_cost(*, records: list[Record]) -> dict[tuple, RecordCost]:
    """The cost of each of a page of records by primary key, as its page (record_components) prices
    it: each component at the model's price of the hour, or at its pool's rate of the hour. One
    price book and one read of the pools' hours for the page, so a page of 50 costs two queries
    whatever its models and hours."""
    from apps.classification.engine import component_tokens
    from apps.pricing.models import PoolIdleHour
    from apps.pricing.selectors import PoolHourRate, price_book_load

    book = price_book_load()
    hour = {r.pk: hour_floor(r.ts) for r in records}
    bases = {r.pk: book.basis(r.model.name, hour[r.pk]) for r in records}
    pool_hours = {(b.pool.id, hour[pk]) for pk, b in bases.items() if b is not None and b.pool is not None}
    rates: dict[tuple[int, datetime], PoolHourRate] = {}
    if pool_hours:
        pools = {b.pool.id: b.pool for b in bases.values() if b is not None and b.pool is not None}
        found = PoolIdleHour.objects.filter(pool_id__in=list(pools), hour__in=list({h for _p, h in pool_hours}))
        for pool_id, at, allocated, weighted in found.values_list("pool_id", "hour", "allocated", "weighted_tokens"):
            rates[(pool_id, at)] = PoolHourRate(pools[pool_id], at, allocated, weighted)
    costs = {}
    for r in records:
        basis = bases[r.pk]
        if basis is None:
            costs[r.pk] = RecordCost(None, "")
            continue
        rate = rates.get((basis.pool.id, hour[r.pk])) if basis.pool is not None else None
        parts = [
            _component_cost(basis.prices, rate, i, max(tokens, 0)) if basis.pool is None or rate else None
            for i, tokens in enumerate(component_tokens(r))
            if tokens
        ]
        currency = basis.pool.currency if basis.pool is not None else basis.version.currency if basis.version else ""
        known = [p for p in parts if p is not None]
        costs[r.pk] = RecordCost(sum(known, Decimal(0)) if len(known) == len(parts) else None, currency)
    return costs


# The engine ids vLLM gives a request of each endpoint, which the serving middleware records as the
# record id (serving.middleware.ENGINE_ID_PREFIX): a request id is found as any of them.
REQUEST_ID_PREFIXES = ("chatcmpl-", "cmpl-", "embd-", "resp_")


def records_search(*, flt: Filters, lines: list[str] | None, text: str, limit: int = 50) -> list[Record]:
    """The records of the window, newest first, whose record id is `text`, whose request id is
    `text` (an engine id of it), or of the conversation `text`. The ids are found through their
    record keys (the records' key, with ts: at most the window's index entries), a conversation
    through its dim sets."""
    ids = [text, *(prefix + text for prefix in REQUEST_ID_PREFIXES)]
    named = Record.objects.select_related("model", "dims", "source").filter(
        ts__gte=flt.start, ts__lt=flt.end, record_key__in=[record_key(i) for i in ids], record_id__in=ids
    )
    if lines is not None:
        named = named.filter(dims__business_line__in=lines)
    found = {r.pk: r for r in named.order_by("-ts")[:limit]}
    for r in conversation(flt=flt, lines=lines, conversation_id=text, limit=limit):
        found.setdefault(r.pk, r)
    return sorted(found.values(), key=lambda r: r.pk, reverse=True)[:limit]
