"""Reads of the ingest app: records (keyset-paginated) and usage from the hourly rollups."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from apps.accounts.models import CollectorKey
from apps.common.composed import SQL, Composable, Identifier, Literal, col, commas, table, text
from apps.common.replica import read_connection
from apps.ingest.models import TOKEN_FIELDS, DimSet, HourlyUsage, Record, Rejection, ServedModel
from apps.ingest.queries import DIMS, dims_join, rollup_where

USAGE_GROUPS = ("model", "model_version", "source", "endpoint", "status")
GRANULARITIES = ("hour", "day", "month")


class InvalidCursor(ValueError):
    pass


def cursor_encode(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


def cursor_decode(cursor: str) -> list[Any]:
    try:
        return json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError as exc:
        raise InvalidCursor("cursor is not one this API returned") from exc


# The widening windows of records_list: an hour, doubled until the whole range.
LIST_WINDOWS = (*(timedelta(hours=2**i) for i in range(12)), None)


@dataclass(frozen=True)
class RecordFilter:
    start: datetime
    end: datetime
    model: str | None = None
    status: int | None = None
    source_id: int | None = None
    dims: dict[str, str] | None = None
    business_lines: list[str] | None = None  # the reader's scope; None = all
    finish_reason: int | None = None


def records_list(*, flt: RecordFilter, limit: int, after: str | None = None) -> tuple[list[Record], str | None]:
    """Newest first; `after` is the cursor of the previous page."""
    qs: QuerySet[Record] = Record.objects.filter(ts__gte=flt.start, ts__lt=flt.end).select_related(
        "model", "dims", "source"
    )
    records = Record._meta.db_table  # the RawSQL conditions below qualify its columns
    if flt.model:
        qs = qs.filter(model_id__in=list(ServedModel.objects.filter(name=flt.model).values_list("id", flat=True)))
    if flt.status is not None:
        qs = qs.filter(status=flt.status)
    if flt.source_id is not None:
        qs = qs.filter(source_id=flt.source_id)
    if flt.dims:
        # The dim sets first (a small table with a GIN index), then the records by their ids:
        # the records' (dims_id, ts) index instead of a join tested record by record.
        sets = DimSet.objects.filter(dims__contains=flt.dims)
        if flt.business_lines is not None:
            sets = sets.filter(business_line__in=flt.business_lines)
        ids = list(sets.values_list("id", flat=True))
        # One array parameter: a list of hundreds of ids compiled element by element per query
        # costs more than the query.
        qs = qs.filter(RawSQL(f"{records}.dims_id = ANY(%s)", [ids], output_field=BooleanField()))
    elif flt.business_lines is not None:
        qs = qs.filter(dims__business_line__in=flt.business_lines)
    if flt.finish_reason is not None:
        qs = qs.filter(finish_reason=flt.finish_reason)
    upper = flt.end
    if after:
        ts, source_id, key = cursor_decode(after)
        try:
            upper = min(upper, datetime.fromisoformat(ts) + timedelta(microseconds=1))
        except (TypeError, ValueError) as exc:
            raise InvalidCursor("cursor is not one this API returned") from exc
        qs = qs.filter(
            RawSQL(
                f"({records}.ts, {records}.source_id, {records}.record_key) < (%s::timestamptz, %s, %s)",
                [ts, source_id, key],
                output_field=BooleanField(),
            )
        )
    ordered = qs.order_by("-ts", "-source_id", "-record_key")
    # Newest first through windows doubling from an hour: a page of a common filter is found in
    # the last hours without sorting the month's matches; a rare one (the waste reasons a record
    # decides itself have an index by dim set) reads about twice the rows it shows.
    for width in LIST_WINDOWS:
        lower = flt.start if width is None else max(flt.start, upper - width)
        rows = list(ordered.filter(ts__gte=lower, ts__lt=upper)[: limit + 1])
        if len(rows) > limit or lower <= flt.start:
            break
    nxt = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        nxt = cursor_encode([last.ts.isoformat(), last.source_id, last.record_key])
    return rows, nxt


# group_by names of usage_series and their SQL over u (the usage rollup row), m (model), k (source).
USAGE_COLUMNS: dict[str, Composable] = {
    "model": col("m", "name"),
    "model_version": col("m", "version"),
    "source": col("k", "name"),
    "endpoint": col("u", "endpoint"),
    "status": col("u", "status"),
}
_USAGE = SQL(
    "SELECT {columns} FROM {usage} u JOIN {models} m ON m.id = u.model_id JOIN {keys} k ON k.id = u.source_id "
    "{dims} WHERE {where} GROUP BY {groups} ORDER BY 1, {last} DESC"
)


def usage_series(
    *,
    start: datetime,
    end: datetime,
    granularity: str,
    group_by: list[str],
    dims: dict[str, str] | None = None,
    business_lines: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Token sums from the hourly rollups, per period and the requested groups (only of
    `business_lines` when given: the reader's scope).

    `group_by` items are USAGE_GROUPS or names of rollup dims (settings.ROLLUP_DIMS).
    """
    # An hour is its bucket (past the UTC hour in a zone of half hours); days and months are UTC's.
    period: Composable = SQL("u.hour")
    if granularity != "hour":
        period = SQL("date_trunc({}, u.hour, 'UTC')").format(Literal(granularity))
    select: list[Composable] = [SQL("{} AS period").format(period)]
    params: list[Any] = []
    for name in group_by:
        column: Composable | None = USAGE_COLUMNS.get(name)
        if column is None:
            column = SQL("coalesce(d.dims ->> %s, '')")
            params.append(name)
        select.append(SQL("{} AS {}").format(column, Identifier(name)))
    sums = [SQL("sum({})::bigint AS {}").format(col("u", f), Identifier(f)) for f in ("records", *TOKEN_FIELDS)]
    where, where_params = rollup_where(alias="u", start=start, end=end, dims=dims, business_lines=business_lines)
    sql = _USAGE.format(
        columns=commas([*select, *sums]),
        usage=table(HourlyUsage),
        models=table(ServedModel),
        keys=table(CollectorKey),
        dims=dims_join("u"),
        where=where,
        groups=SQL(", ").join(Literal(i) for i in range(1, len(select) + 1)),
        last=Literal(len(select) + 1),
    )
    with read_connection().cursor() as cursor:
        cursor.execute(text(sql), params + where_params)
        names = [col.name for col in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def rejections_list(*, source_id: int | None, limit: int, after: int | None) -> tuple[list[Rejection], int | None]:
    qs = Rejection.objects.select_related("source").order_by("-id")
    if source_id is not None:
        qs = qs.filter(source_id=source_id)
    if after is not None:
        qs = qs.filter(id__lt=after)
    rows = list(qs[: limit + 1])
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1].id
    return rows, None


# Known values of a dim offered as a list; a dim with more (a user id) is typed instead.
DIM_VALUES_LISTED = 200

_DIM_VALUES = SQL("""
SELECT key, value FROM (
    SELECT e.key, e.value, row_number() OVER (PARTITION BY e.key ORDER BY e.value) AS n
    FROM (SELECT DISTINCT e.key, e.value
          FROM {dims} d CROSS JOIN LATERAL jsonb_each_text(d.dims) AS e(key, value)
          WHERE d.rollup_id IS NULL AND e.key = ANY(%s) AND e.value <> '' {lines}) AS e
) AS listed
WHERE n <= %s
ORDER BY key, value
""")
_LINES = SQL("AND d.business_line = ANY(%s)")


def dim_values(
    *, names: list[str], lines: list[str] | None, limit: int = DIM_VALUES_LISTED
) -> dict[str, list[str] | None]:
    """The values each dim of `names` is known to take in the dim sets of the rollups, sorted,
    only in the business lines `lines` (None: all); None for a dim with more than `limit`."""
    where, params = (SQL(""), []) if lines is None else (_LINES, [lines])
    with read_connection().cursor() as cursor:
        cursor.execute(text(_DIM_VALUES.format(dims=DIMS, lines=where)), [names, *params, limit + 1])
        found: dict[str, list[str]] = {name: [] for name in names}
        for key, value in cursor.fetchall():
            found[key].append(value)
    return {name: values if len(values) <= limit else None for name, values in found.items()}
