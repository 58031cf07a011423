"""Ingest's part of the rollup reads, composed with psycopg's `sql` module: a rollup row joined
to its dim set, and the filter every read over an hourly rollup shares (its hours, the dims a
row must carry, the reader's business lines). The hourly rollups of the later stages (the class
and cost rollups) key their rows by ingest's rollup dim sets too, so their reads take these from
here: the dim set's columns are ingest's to name."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from apps.common.composed import SQL, Composed, col, table
from apps.ingest.models import DimSet

DIMS = table(DimSet)


def dims_join(alias: str) -> Composed:
    """JOIN the dim set of the rollup row `alias`, as `d`."""
    return SQL("JOIN {} d ON d.id = {}").format(DIMS, col(alias, "dims_id"))


def rollup_where(
    *, alias: str, start: datetime, end: datetime, dims: dict[str, str] | None, business_lines: list[str] | None
) -> tuple[Composed, list[Any]]:
    """The condition (without WHERE) and its parameters: hours in [start, end) of the rollup row
    `alias`, rows whose dim set `d` (dims_join) contains `dims`, only `business_lines` unless None."""
    hour = col(alias, "hour")
    where = SQL("{h} >= %s AND {h} < %s").format(h=hour)
    params: list[Any] = [start, end]
    if dims:
        where += SQL(" AND d.dims @> %s::jsonb")
        params.append(json.dumps(dims))
    if business_lines is not None:
        where += SQL(" AND d.business_line = ANY(%s)")
        params.append(business_lines)
    return where, params
