"""The filter every read over an hourly rollup shares: its hours, the dimensions a row must
carry, and the reader's business lines. The rollup is joined to its dimension set as `d`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def rollup_where(
    *, alias: str, start: datetime, end: datetime, dims: dict[str, str] | None, business_lines: list[str] | None
) -> tuple[str, list[Any]]:
    """The WHERE clause (without the keyword) and its parameters: hours in [start, end) of the
    rollup named `alias`, rows whose dims contain `dims`, and only `business_lines` unless None."""
    where = f"{alias}.hour >= %s AND {alias}.hour < %s"
    params: list[Any] = [start, end]
    if dims:
        where += " AND d.dims @> %s::jsonb"
        params.append(json.dumps(dims))
    if business_lines is not None:
        where += " AND d.business_line = ANY(%s)"
        params.append(business_lines)
    return where, params
