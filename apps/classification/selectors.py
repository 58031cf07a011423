"""Reads of classification: tokens (and their cost) per class and reason from the rollups."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from apps.classification.engine import COMPONENT_KIND, COMPONENTS
from apps.common.buckets import zone_name
from apps.common.replica import read_connection
from apps.common.rollups import rollup_where

# group_by names and their SQL over: c (a class or cost rollup row), r (reason), m (model), k (source).
CLASS_GROUPS = {
    "class": "split_part(r.name, '.', 1)",
    "reason": "r.name",
    "component": "c.component",
    "model": "m.name",
    "model_version": "m.version",
    "source": "k.name",
}
_JOINS = (
    "JOIN classification_reason r ON r.id = c.reason_id JOIN ingest_servedmodel m ON m.id = c.model_id "
    "JOIN accounts_collectorkey k ON k.id = c.source_id JOIN ingest_dimset d ON d.id = c.dims_id"
)


def _grouped(
    table: str,
    measure: str,
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
    select = [f"date_trunc('{granularity}', c.hour, %s)"]
    params: list[Any] = [zone_name()]
    for name in group_by:
        if name in CLASS_GROUPS:
            select.append(CLASS_GROUPS[name])
        else:
            select.append("coalesce(d.dims ->> %s, '')")
            params.append(name)
    select += [f"c.{column}" for column in extra]
    where, where_params = rollup_where(alias="c", start=start, end=end, dims=dims, business_lines=business_lines)
    params += where_params
    sql = (
        f"SELECT {', '.join(select)}, {measure} FROM {table} c {_JOINS} WHERE {where} "
        f"GROUP BY {', '.join(str(i) for i in range(1, len(select) + 1))}"
    )
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
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

    def grouped(table: str, measure: str, extra: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
        return _grouped(
            table,
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
    for found in grouped("classification_hourlyclass", "sum(c.tokens)::bigint"):
        rows[found[:width]] = {"tokens": int(found[width]), "cost": defaultdict(Decimal), "priced_tokens": 0}
    for found in grouped("pricing_hourlycost", "sum(c.tokens)::bigint, sum(c.cost)", ("currency",)):
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
