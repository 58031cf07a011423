"""The dashboards' rollup reads as typed queries composed with psycopg's `sql` module.

A read sums one rollup (the class or the cost rollup) over a window: whole days from a daily
table, the rest from the hourly one, each a `RollupPart` of one `RollupQuery`. The query's
`Grouping` says what it groups by (columns g0, g1, ... in order of first use, one grouping set a
list of names) and which measures it sums; its `Match` says which rows it keeps. Each part is
one grouped SELECT; the parts are joined by UNION ALL. tests/dashboards/test_queries.py holds
the exact SQL of each shape."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from apps.common.composed import SQL, Composable, Composed, Identifier, Literal, col, commas, table, text
from apps.ingest.models import DimSet, Record, ServedModel

# What a rollup's measure sums, over its column of the same name.
MEASURES = {"tokens": SQL("sum(c.tokens)::bigint"), "cost": SQL("sum(c.cost)")}
_DIMS = table(DimSet)


@dataclass(frozen=True)
class Grouping:
    """What a read groups by and sums: `names` are the group names in order of first use (output
    columns g0, g1, ...), `sets` one grouping set each (names out of `names`), `measures` keys of
    MEASURES. Group names: "period", "component", "currency", "class", "reason", "model",
    "dims_id", "business_line" or a rollup dim."""

    sets: tuple[tuple[str, ...], ...]
    measures: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for groups in self.sets for name in groups))


@dataclass(frozen=True)
class Match:
    """The rows every part of a read keeps, and how a period is cut: `granularity` ("hour",
    "day", ...) in the accounting zone `zone` (`utc_days`: its days are UTC days); `dims` rows
    whose dim set holds these dims (business_line among them); `lines` the reader's business
    lines; `reasons` and `models` id lists (None: no such filter)."""

    granularity: str
    zone: str
    utc_days: bool
    dims: tuple[tuple[str, str], ...] = ()
    lines: tuple[str, ...] | None = None
    reasons: tuple[int, ...] | None = None
    models: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RollupPart:
    """One rollup table of a read: its time column `when` ("day" or "hour"), whether it has a
    business line column of its own (`by_line`; else the line is its dim set's), and the
    [from, to) ranges of that column it serves."""

    table: str
    when: str
    by_line: bool
    ranges: tuple[tuple[datetime, datetime], ...]

    def query(self, grouping: Grouping, match: Match) -> tuple[Composed, list[Any]]:
        """One grouped SELECT of this part and its parameters: `statement` and `params`."""
        return self.statement(grouping, match), self.params(grouping, match)

    def statement(self, grouping: Grouping, match: Match) -> Composed:
        """One grouped SELECT of this part, one grouping set per entry of `grouping.sets`, its last
        group column the set of each row (GROUPING); the dim set joined as `d` only when a dim other
        than the business line of a `by_line` table is filtered or grouped by. It depends on the
        shape of `match` (which filters there are), never on its values: those are `params`."""
        when = col("c", self.when)
        line = col("c", "business_line") if self.by_line else col("d", "business_line")
        join = False
        select: list[Composable] = []
        for i, name in enumerate(grouping.names):
            expr: Composable
            if self._period_as_is(name, match):
                expr = when  # a daily row's UTC midnight by the day, an hourly row's own UTC hour
            elif name == "period":
                expr = SQL("date_trunc({}, {}, %s)").format(Literal(match.granularity), when)  # accounting days
            elif name in ("component", "currency"):
                expr = col("c", name)
            elif name in ("class", "reason"):
                expr = col("c", "reason_id")
            elif name == "model":
                expr = col("c", "model_id")
            elif name == "dims_id":  # the rollup dim set (read for its dims afterwards)
                expr = col("c", "dims_id")
            elif name == "business_line":
                expr = line
                join = join or not self.by_line
            else:
                expr = SQL("coalesce(d.dims ->> %s, '')")
                join = True
            select.append(SQL("{} AS {}").format(expr, Identifier(f"g{i}")))
        in_range = SQL("({w} >= %s AND {w} < %s)").format(w=when)
        where: list[Composable] = [SQL("({})").format(SQL(" OR ").join([in_range] * len(self.ranges)))]
        if match.reasons is not None:
            where.append(SQL("c.reason_id = ANY(%s)"))
        if match.models is not None:
            where.append(SQL("c.model_id = ANY(%s)"))
        names = {name for name, _ in match.dims}
        if "business_line" in names:
            where.append(SQL("{} = %s").format(line))
            join = join or not self.by_line
        if names - {"business_line"}:
            where.append(SQL("d.dims @> %s::jsonb"))
            join = True
        if match.lines is not None:
            where.append(SQL("{} = ANY(%s)").format(line))
            join = join or not self.by_line
        columns = [*select, *(col("c", m) for m in grouping.measures)]
        inner = SQL("SELECT {} FROM {} c").format(commas(columns), Identifier(self.table))
        if join:
            inner += SQL(" JOIN {} d ON d.id = c.dims_id").format(_DIMS)
        inner += SQL(" WHERE ") + SQL(" AND ").join(where)
        out = [Identifier(f"g{i}") for i in range(len(grouping.names))]
        several = len(grouping.sets) > 1
        grouping_of = SQL("GROUPING({})").format(commas(out)) if several else SQL("0")
        measures = [MEASURES[m] for m in grouping.measures]
        statement = SQL("SELECT {} FROM ({}) c").format(commas([*out, grouping_of, *measures]), inner)
        if several:
            sets = [
                SQL("({})").format(commas(Identifier(f"g{grouping.names.index(n)}") for n in groups))
                for groups in grouping.sets
            ]
            statement += SQL(" GROUP BY GROUPING SETS ({})").format(commas(sets))
        elif out:
            statement += SQL(" GROUP BY {}").format(commas(out))
        return statement

    def params(self, grouping: Grouping, match: Match) -> list[Any]:
        """The parameters of `statement`, in the order of its placeholders."""
        params: list[Any] = []
        for name in grouping.names:
            if name == "period" and not self._period_as_is(name, match):
                params.append(match.zone)
            elif name not in _OWN_GROUPS:
                params.append(name)  # a dim of the dim set
        params += [bound for pair in self.ranges for bound in pair]
        if match.reasons is not None:
            params.append(list(match.reasons))
        if match.models is not None:
            params.append(list(match.models))
        dims = dict(match.dims)
        if "business_line" in dims:
            params.append(dims.pop("business_line"))
        if dims:
            params.append(json.dumps(dims))
        if match.lines is not None:
            params.append(list(match.lines))
        return params

    def _period_as_is(self, name: str, match: Match) -> bool:
        """Whether the period is the row's own time column: a daily row's UTC midnight when days are
        read by the day (UTC days), an hourly row's hour when hours are read in UTC days."""
        if name != "period":
            return False
        if self.when == "day":
            return match.granularity == "day"
        return match.granularity == "hour" and match.utc_days

    def shape(self, match: Match) -> tuple[RollupPart, Match]:
        """This part and `match` with their values left out: what `statement` depends on."""
        part = RollupPart(self.table, self.when, self.by_line, ((_NO_TIME, _NO_TIME),) * len(self.ranges))
        return part, Match(
            granularity=match.granularity,
            zone="",
            utc_days=match.utc_days,
            dims=tuple((name, "") for name, _ in match.dims),
            lines=None if match.lines is None else (),
            reasons=None if match.reasons is None else (),
            models=None if match.models is None else (),
        )


# The group names read from a rollup's own columns (any other is a dim of its dim set).
_OWN_GROUPS = frozenset({"period", "component", "currency", "class", "reason", "model", "dims_id", "business_line"})
_NO_TIME = datetime.min


@lru_cache(maxsize=1024)
def _statement_text(part: RollupPart, grouping: Grouping, match: Match) -> str:
    """A part's statement by its shape (RollupPart.shape), composed once: a page reads a few shapes
    again and again, and composing one costs more than a millisecond."""
    return text(part.statement(grouping, match))


@dataclass(frozen=True)
class RollupQuery:
    """A read of one rollup: its parts (those with ranges) summed alike and joined by UNION ALL."""

    grouping: Grouping
    match: Match
    parts: tuple[RollupPart, ...]

    def composed(self) -> tuple[Composed, list[Any]] | None:
        """The statement and its parameters; None when no part has a range to read."""
        statements: list[Composable] = []
        params: list[Any] = []
        for part in self.parts:
            if part.ranges:
                statement, found = part.query(self.grouping, self.match)
                statements.append(statement)
                params += found
        if not statements:
            return None
        return SQL(" UNION ALL ").join(statements), params

    def statement_text(self) -> tuple[str, list[Any]] | None:
        """`composed` as the text a cursor executes, each part's statement composed once a shape."""
        texts: list[str] = []
        params: list[Any] = []
        for part in self.parts:
            if part.ranges:
                shape, match = part.shape(self.match)
                texts.append(_statement_text(shape, self.grouping, match))
                params += part.params(self.grouping, self.match)
        return (" UNION ALL ".join(texts), params) if texts else None


# What a read grouped by dim set sums again once its dims are read, over its column of the same name.
_RESUMS = {"tokens": SQL("sum(s.tokens)::bigint"), "cost": SQL("sum(s.cost)")}


def dim_values(inner: Composable, *, measure: str, extra: str | None) -> Composed:
    """Rows of (dim, value, `extra` if given, `measure`) from `inner`, a read grouped by dim set
    (and `extra`) of rows (dims_id, [extra,] grouping, measure): each dim set read once for its
    values of the dims of the text array parameter that follows the inner query's."""
    own = [Identifier("s", extra)] if extra else []
    columns = [Identifier("dims_id"), *([Identifier(extra)] if extra else []), Identifier("grouping")]
    return SQL(
        "SELECT k.dim, CASE WHEN k.dim = 'business_line' THEN d.business_line ELSE coalesce(d.dims ->> k.dim, '') END, "
        "{selected} FROM ({inner}) AS s({columns}) "
        "JOIN {dims} d ON d.id = s.dims_id CROSS JOIN unnest(%s::text[]) AS k(dim) GROUP BY {groups}"
    ).format(
        selected=commas([*own, _RESUMS[measure]]),
        inner=inner,
        columns=commas([*columns, Identifier(measure)]),
        dims=_DIMS,
        groups=SQL("1, 2, 3" if extra else "1, 2"),
    )


# An ok request is a duplicate when an earlier ok request of the same source, prompt hash,
# model name and business line lies within the duplicate window before it (apps.classification
# .services.duplicates_find); the original shown is that nearest earlier one, found through the
# (prompt_hash, ts) index one probe per listed request. Parameters: the window's seconds, the
# window's start and end, those of `where`, the limit.
_DUPLICATES = SQL(
    """
SELECT r.ts, r.source_id, r.record_key, o.ts, o.source_id, o.record_key
FROM {records} r
JOIN {dims} d ON d.id = r.dims_id
JOIN {models} m ON m.id = r.model_id
CROSS JOIN LATERAL (
    SELECT o.ts, o.source_id, o.record_key FROM {records} o
    JOIN {dims} od ON od.id = o.dims_id JOIN {models} om ON om.id = o.model_id
    WHERE o.prompt_hash = r.prompt_hash AND o.source_id = r.source_id AND om.name = m.name
      AND o.status = 0 AND od.business_line = d.business_line
      AND o.ts < r.ts AND o.ts >= r.ts - make_interval(secs => %s)
    ORDER BY o.ts DESC LIMIT 1
) o
WHERE r.status = 0 AND r.prompt_hash IS NOT NULL AND r.ts >= %s AND r.ts < %s AND {where}
ORDER BY r.ts DESC, r.source_id DESC, r.record_key DESC
LIMIT %s
"""
)


def duplicates_query(where: list[Composable]) -> Composed:
    """The duplicates listing, its records `r` (dim set `d`) also kept by each condition of `where`."""
    return _DUPLICATES.format(
        records=table(Record), dims=_DIMS, models=table(ServedModel), where=SQL(" AND ").join(where or [SQL("TRUE")])
    )


# The records of a window classified by the SQL of reclassification (classification.sql.records_sql,
# its rows `x`), with the reason expression and the tokens of each component (in the same order).


def record_components_query(
    records: Composable, reasons: Sequence[Composable], tokens: Sequence[Composable]
) -> Composed:
    """Each component's reason id and tokens of the one record of `records` with the ts, source,
    model, rollup dims and token counts given as parameters after the records' own."""
    return SQL(
        "SELECT {reasons}, {tokens} FROM ({records}) x "
        "WHERE x.ts = %s AND x.source_id = %s AND x.model_id = %s AND x.rollup_dims_id = %s "
        "AND x.prompt = %s AND x.completion = %s AND x.reasoning = %s LIMIT 1"
    ).format(reasons=commas(reasons), tokens=commas(tokens), records=records)


def by_conversation_query(
    records: Composable, reasons: Sequence[Composable], tokens: Sequence[Composable], where: Sequence[Composable]
) -> Composed:
    """Per conversation of `records` kept by `where`: the tokens whose reason is in a list (an
    int[] parameter a component, before the records' parameters and again after `where`'s), and
    all its tokens; largest first, as many as the last parameter."""
    chosen = SQL(" + ").join(
        SQL("CASE WHEN {} = ANY(%s) THEN {} ELSE 0 END").format(reason, count)
        for reason, count in zip(reasons, tokens, strict=True)
    )
    return SQL(
        "SELECT x.conversation, sum({chosen})::bigint AS measured, sum({total})::bigint "
        "FROM ({records}) x WHERE {where} GROUP BY x.conversation "
        "HAVING sum({chosen}) > 0 ORDER BY measured DESC, x.conversation LIMIT %s"
    ).format(chosen=chosen, total=SQL(" + ").join(tokens), records=records, where=SQL(" AND ").join(where))
