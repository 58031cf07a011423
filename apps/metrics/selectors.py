"""Reads behind /metrics: a few aggregate queries over the rollups and small tables, with
business lines and models outside the top N folded into "other" in SQL (docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection

from apps.accounts.models import CollectorKey
from apps.alerts.models import AlertState, Channel, Notification, Rule
from apps.classification.models import HourlyClass, Reason
from apps.common.buckets import hour_floor
from apps.common.composed import SQL, Composable, Literal, col, commas, table, text
from apps.ingest.models import HourlyUsage, Record, Rejection, ServedModel, Status
from apps.ingest.queries import dims_join
from apps.pricing.models import HourlyCost, UnpricedHour

HOUR = timedelta(hours=1)
OTHER = "other"
NONE = "(none)"  # records without a business_line dim

# A label value: the name when it is in the top list (a text[] parameter), else 'other'.
_LINE = SQL("CASE WHEN d.business_line = ANY(%s) THEN d.business_line ELSE 'other' END")
_MODEL = SQL("CASE WHEN m.name = ANY(%s) THEN m.name ELSE 'other' END")
_USAGE, _MODELS = table(HourlyUsage), table(ServedModel)


@dataclass(frozen=True)
class Windows:
    """Rollup windows: `hour` is the clock hour now falls in, `day` the 24 hour buckets ending
    with it (the alert detectors' convention). Event tables use rolling windows from `now`."""

    now: datetime
    hour: datetime
    day: datetime

    @classmethod
    def at(cls, now: datetime) -> Windows:
        hour = hour_floor(now)
        return cls(now=now, hour=hour, day=hour - 23 * HOUR)


@dataclass
class Snapshot:
    """Rows as (labels..., value in the last hour, value in the last day)."""

    lines: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    tokens: list[tuple[Any, ...]] = field(default_factory=list)  # class, reason, model, line
    cost: list[tuple[Any, ...]] = field(default_factory=list)  # class, model, line, currency
    records: list[tuple[Any, ...]] = field(default_factory=list)  # model, line, status
    prompt: tuple[int, int] = (0, 0)  # prompt, prompt_cached over the day
    unpriced: list[tuple[str, int]] = field(default_factory=list)  # model, tokens over the day
    lag: list[tuple[str, float | None, float | None]] = field(default_factory=list)  # source, last seen, newest ts
    rejections: list[tuple[Any, ...]] = field(default_factory=list)  # source
    deliveries: list[tuple[Any, ...]] = field(default_factory=list)  # channel kind, status
    overdue: int = 0
    firing: list[tuple[str, int]] = field(default_factory=list)  # detector, subjects firing


def _rows(sql: Composable, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(text(sql), list(params))
        return cursor.fetchall()


def _label(value: str) -> str:
    return value if value else NONE


_TOP = SQL(
    "SELECT {label} FROM {usage} u {join} WHERE u.hour >= %s "
    "GROUP BY 1 ORDER BY sum(u.prompt + u.completion) DESC, 1 LIMIT %s"
)


def top_lines_and_models(*, w: Windows, lines: int, models: int) -> tuple[list[str], list[str]]:
    """The business lines and model names with most tokens in the day window, at most N each."""
    top_lines = _rows(_TOP.format(label=SQL("d.business_line"), usage=_USAGE, join=dims_join("u")), [w.day, lines])
    join_models = SQL("JOIN {} m ON m.id = u.model_id").format(_MODELS)
    top_models = _rows(_TOP.format(label=SQL("m.name"), usage=_USAGE, join=join_models), [w.day, models])
    return [row[0] for row in top_lines], [row[0] for row in top_models]


def _windowed(
    select: Sequence[Composable], rollup: Composable, measure: str, joins: Composable, w: Windows, params: list[Any]
) -> list[tuple[Any, ...]]:
    """The `select` columns of a rollup `c`, with sum(measure) over the hour and the day windows."""
    sql = SQL(
        "SELECT {select}, sum({measure}) FILTER (WHERE c.hour >= %s), sum({measure}) "
        "FROM {rollup} c {joins} WHERE c.hour >= %s GROUP BY {groups}"
    ).format(
        select=commas(select),
        measure=col("c", measure),
        rollup=rollup,
        joins=joins,
        groups=SQL(", ").join(Literal(i) for i in range(1, len(select) + 1)),
    )
    return _rows(sql, [*params, w.hour, w.day])


_CLASS = SQL("split_part(r.name, '.', 1)")
_CLASS_JOINS = SQL("JOIN {} r ON r.id = c.reason_id JOIN {} m ON m.id = c.model_id {}").format(
    table(Reason), _MODELS, dims_join("c")
)


def tokens_by_reason(*, w: Windows, lines: list[str], models: list[str]) -> list[tuple[Any, ...]]:
    """(class, reason, model, business line, tokens hour, tokens day) from the class rollup."""
    select = [_CLASS, SQL("r.name"), _MODEL, _LINE]
    rows = _windowed(select, table(HourlyClass), "tokens", _CLASS_JOINS, w, [models, lines])
    return [(c, r, m, _label(line), int(h or 0), int(d or 0)) for c, r, m, line, h, d in rows]


def cost_by_class(*, w: Windows, lines: list[str], models: list[str]) -> list[tuple[Any, ...]]:
    """(class, model, business line, currency, cost hour, cost day) from the cost rollup."""
    select = [_CLASS, _MODEL, _LINE, SQL("c.currency")]
    rows = _windowed(select, table(HourlyCost), "cost", _CLASS_JOINS, w, [models, lines])
    return [(c, m, _label(line), cur, Decimal(h or 0), Decimal(d or 0)) for c, m, line, cur, h, d in rows]


def records_by_status(*, w: Windows, lines: list[str], models: list[str]) -> list[tuple[Any, ...]]:
    """(model, business line, status, records hour, records day) from the usage rollup."""
    joins = SQL("JOIN {} m ON m.id = c.model_id {}").format(_MODELS, dims_join("c"))
    rows = _windowed([_MODEL, _LINE, SQL("c.status")], _USAGE, "records", joins, w, [models, lines])
    names = dict(Status.choices)
    return [(m, _label(line), names.get(s, str(s)), int(h or 0), int(d or 0)) for m, line, s, h, d in rows]


def prompt_day(*, w: Windows) -> tuple[int, int]:
    """All prompt tokens and the cached ones in the day window (the cache hit rate)."""
    rows = _rows(SQL("SELECT sum(prompt), sum(prompt_cached) FROM {} WHERE hour >= %s").format(_USAGE), [w.day])
    prompt, cached = rows[0]
    return int(prompt or 0), int(cached or 0)


def unpriced_day(*, w: Windows, models: list[str]) -> list[tuple[str, int]]:
    sql = SQL(
        "SELECT {model}, sum(c.tokens) FROM {unpriced} c JOIN {models} m ON m.id = c.model_id "
        "WHERE c.hour >= %s GROUP BY 1"
    ).format(model=_MODEL, unpriced=table(UnpricedHour), models=_MODELS)
    return [(m, int(t)) for m, t in _rows(sql, [models, w.day])]


def source_lag(*, w: Windows) -> list[tuple[str, float | None, float | None]]:
    """Per collector key that is not revoked: when it last sent (epoch s) and the ts of its
    newest record (epoch s), looked for only in the last hour bucket it has rows in over the
    last two days, so a scrape reads one hour of one index per source."""
    sql = SQL("""
        SELECT k.name, extract(epoch FROM k.last_seen_at),
               extract(epoch FROM (SELECT max(r.ts) FROM {records} r WHERE r.source_id = k.id
                                   AND r.ts >= u.last_hour AND r.ts < u.last_hour + interval '1 hour'))
        FROM {keys} k
        LEFT JOIN LATERAL (SELECT max(hour) AS last_hour FROM {usage}
                           WHERE source_id = k.id AND hour >= %s) u ON true
        WHERE k.revoked_at IS NULL
        ORDER BY k.name
    """).format(records=table(Record), keys=table(CollectorKey), usage=_USAGE)
    rows = _rows(sql, [w.hour - 47 * HOUR])
    return [(name, _float(seen), _float(newest)) for name, seen, newest in rows]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def rejections(*, w: Windows) -> list[tuple[Any, ...]]:
    """(source, refused hour, refused day): dead-letter rows received in the rolling windows."""
    sql = SQL(
        "SELECT k.name, count(*) FILTER (WHERE j.received_at >= %s), count(*) FROM {rejections} j "
        "JOIN {keys} k ON k.id = j.source_id WHERE j.received_at >= %s GROUP BY 1"
    ).format(rejections=table(Rejection), keys=table(CollectorKey))
    return _rows(sql, [w.now - HOUR, w.now - 24 * HOUR])


_NOTIFICATIONS = table(Notification)


def deliveries(*, w: Windows) -> tuple[list[tuple[Any, ...]], int]:
    """(channel kind, status, attempts hour, attempts day) of alert notifications due in the
    rolling windows, and the queued ones already due (the backlog)."""
    rows = _rows(
        SQL(
            "SELECT c.kind, n.status, count(*) FILTER (WHERE n.due_at >= %s), count(*) FROM {notifications} n "
            "JOIN {channels} c ON c.id = n.channel_id WHERE n.due_at >= %s GROUP BY 1, 2"
        ).format(notifications=_NOTIFICATIONS, channels=table(Channel)),
        [w.now - HOUR, w.now - 24 * HOUR],
    )
    due = SQL("SELECT count(*) FROM {} WHERE status = 'queued' AND due_at <= %s").format(_NOTIFICATIONS)
    overdue = _rows(due, [w.now])
    return rows, int(overdue[0][0])


def firing() -> list[tuple[str, int]]:
    sql = SQL(
        "SELECT r.detector, count(*) FROM {states} s JOIN {rules} r ON r.id = s.rule_id "
        "WHERE s.status = 'firing' GROUP BY 1"
    ).format(states=table(AlertState), rules=table(Rule))
    return [(detector, int(n)) for detector, n in _rows(sql, [])]


def platform_snapshot(*, now: datetime, top_lines: int, top_models: int) -> Snapshot:
    """Everything /metrics reports from the database, read at `now`."""
    w = Windows.at(now)
    lines, models = top_lines_and_models(w=w, lines=top_lines, models=top_models)
    shot = Snapshot(lines=lines, models=models)
    shot.tokens = tokens_by_reason(w=w, lines=lines, models=models)
    shot.cost = cost_by_class(w=w, lines=lines, models=models)
    shot.records = records_by_status(w=w, lines=lines, models=models)
    shot.prompt = prompt_day(w=w)
    shot.unpriced = unpriced_day(w=w, models=models)
    shot.lag = source_lag(w=w)
    shot.rejections = rejections(w=w)
    shot.deliveries, shot.overdue = deliveries(w=w)
    shot.firing = firing()
    return shot
