"""Reads of the dashboards, all from the hourly rollups (classification_hourlyclass for tokens,
pricing_hourlycost for money) in one grouped query each; records only a page at a time."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection

from apps.classification.engine import CLASSES, COMPONENTS
from apps.dashboards.filters import Filters

# Group names and their SQL over c (a class or cost rollup row), r (reason), m (model), d (dims).
GROUPS = {"class": "split_part(r.name, '.', 1)", "reason": "r.name", "model": "m.name"}
_JOINS = (
    "JOIN classification_reason r ON r.id = c.reason_id JOIN ingest_servedmodel m ON m.id = c.model_id "
    "JOIN ingest_dimset d ON d.id = c.dims_id"
)


def _where(flt: Filters, lines: list[str] | None) -> tuple[str, list[Any]]:
    where: list[str] = ["c.hour >= %s", "c.hour < %s"]
    params: list[Any] = [flt.start, flt.end]
    if flt.dims:
        where.append("d.dims @> %s::jsonb")
        params.append(json.dumps(flt.dims))
    if lines is not None:
        where.append("d.business_line = ANY(%s)")
        params.append(lines)
    for column, value in (("m.name", flt.model), ("r.name", flt.reason), (GROUPS["class"], flt.token_class)):
        if value:
            where.append(f"{column} = %s")
            params.append(value)
    return " AND ".join(where), params


def _sum(table: str, measures: str, groups: list[str], flt: Filters, lines: list[str] | None) -> list[tuple]:
    """Rows of (*groups, *measures): groups are GROUPS keys, a rollup dim, "period" or "component"."""
    select: list[str] = []
    params: list[Any] = []
    for name in groups:
        if name == "period":
            select.append(f"date_trunc('{flt.granularity}', c.hour, 'UTC')")
        elif name in ("component", "currency"):
            select.append(f"c.{name}")
        elif name in GROUPS:
            select.append(GROUPS[name])
        else:
            select.append("coalesce(d.dims ->> %s, '')")
            params.append(name)
    where, where_params = _where(flt, lines)
    group = f" GROUP BY {', '.join(str(i) for i in range(1, len(select) + 1))}" if select else ""
    sql = f"SELECT {', '.join([*select, measures])} FROM {table} c {_JOINS} WHERE {where}{group}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params + where_params)
        return cursor.fetchall()


@dataclass(frozen=True)
class Health:
    total: int
    by_class: dict[str, int]
    prompt: int
    prompt_cached: int

    def ratio(self, name: str) -> float | None:
        if name == "cache_hit":
            return self.prompt_cached / self.prompt if self.prompt else None
        return self.by_class.get(name, 0) / self.total if self.total else None


def health(*, flt: Filters, lines: list[str] | None) -> Health:
    """Tokens per class, and the prompt and its cached part (the prompt components), in the window."""
    by_class: dict[str, int] = defaultdict(int)
    prompt = cached = 0
    for token_class, component, tokens in _sum(
        "classification_hourlyclass", "sum(c.tokens)::bigint", ["class", "component"], flt, lines
    ):
        by_class[token_class] += tokens
        if COMPONENTS[component] in ("cached_prompt", "uncached_prompt"):
            prompt += tokens
            cached += tokens if COMPONENTS[component] == "cached_prompt" else 0
    return Health(sum(by_class.values()), dict(by_class), prompt, cached)


def class_series(*, flt: Filters, lines: list[str] | None) -> dict[str, dict[datetime, int]]:
    """Tokens per class and period (hour or day, by the window's length)."""
    series: dict[str, dict[datetime, int]] = {name: {} for name in CLASSES}
    for period, token_class, tokens in _sum(
        "classification_hourlyclass", "sum(c.tokens)::bigint", ["period", "class"], flt, lines
    ):
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
    tokens = dict(_sum("classification_hourlyclass", "sum(c.tokens)::bigint", [group], flt, lines))
    cost: dict[str, dict[str, Decimal]] = defaultdict(dict)
    if money:
        for value, currency, amount in _sum("pricing_hourlycost", "sum(c.cost)", [group, "currency"], flt, lines):
            cost[value][currency] = amount
    ranked = sorted(tokens.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [Slice(value, int(count), cost.get(value, {})) for value, count in ranked]


def spend(*, flt: Filters, lines: list[str] | None) -> dict[str, Decimal]:
    """Cost per currency of the priced tokens in the window."""
    return dict(_sum("pricing_hourlycost", "sum(c.cost)", ["currency"], flt, lines))
