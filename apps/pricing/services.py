"""Writes of pricing: price versions, pools, and pricing hours of classified tokens.

HourlyClass rows are priced into HourlyCost rows, a day at a time in one transaction that
deletes the hours' cost rows and writes them anew, so a rerun gives the same result. Price
book rows are one set-based INSERT ... SELECT; pool rows are allocated per pool-hour in
Python (largest remainder) and inserted in one statement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.classification.engine import COMPONENT_KIND
from apps.classification.models import HourlyClass
from apps.common.buckets import hour_floor, rollup_day_of, rollup_day_start
from apps.common.composed import SQL, Identifier, names, table, text, unnest_insert
from apps.common.dayrun import Progress, RunBusy, jobrun_run
from apps.common.db import xact_lock
from apps.common.markrun import Clear, MarkConsumer
from apps.common.models import JobRun
from apps.common.rollup import Marks, MarkTrigger, Rollup
from apps.ingest.models import ServedModel
from apps.pricing.book import Basis, PoolTerms, PriceBook, allocate
from apps.pricing.models import (
    CostPool,
    Currency,
    DirtyHour,
    HourlyCost,
    Kind,
    PoolIdleHour,
    Price,
    PriceVersion,
    UnpricedHour,
)
from apps.pricing.selectors import price_book_load

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Advisory lock key: (namespace, day ordinal) serialises the pricing of a day.
_DAY_LOCK = 0x50524943
NOT_WHOLE_HOURS = "start and end must be aware datetimes on whole hours, start before end"
ONE_CURRENCY = "a price version has one currency: {base} holds {base_currency} prices; copy none or change them all"


class PricingError(ValueError):
    pass


RepriceBusy = RunBusy  # the run's lock is held: another process is running it


def pool_ready_before(*, now: datetime | None = None) -> datetime:
    """Hours before this one have ended (plus the grace period) and get their pool allocation."""
    grace = timedelta(minutes=settings.POOL_GRACE_MINUTES)
    return hour_floor((now or timezone.now()) - grace)


# --- the price book ---------------------------------------------------------------------------


def price_version_create(
    *,
    effective_from: datetime,
    prices: Mapping[str, Mapping[str, Decimal]],
    currency: str = Currency.CNY,
    name: str = "",
    note: str = "",
) -> PriceVersion:
    """A new complete price list: prices[model pattern][kind] per million tokens."""
    with transaction.atomic():
        version = PriceVersion(effective_from=effective_from, currency=currency, name=name, note=note)
        version.full_clean()
        version.save()
        _prices_put(version=version, prices=prices)
    return version


def _prices_put(*, version: PriceVersion, prices: Mapping[str, Mapping[str, Decimal]]) -> None:
    for pattern, by_kind in prices.items():
        for kind, per_million in by_kind.items():
            price = Price.objects.filter(version=version, model_pattern=pattern, kind=kind).first()
            price = price or Price(version=version, model_pattern=pattern, kind=kind)
            price.per_million = Decimal(per_million)
            price.full_clean()
            price.save()


def price_set(
    *, model_pattern: str, prices: Mapping[str, Decimal], effective_from: datetime, currency: str | None = None
) -> PriceVersion:
    """Change one model's prices from `effective_from` (prices_set of one pattern)."""
    return prices_set(prices={model_pattern: prices}, effective_from=effective_from, currency=currency)


def prices_set(
    *,
    prices: Mapping[str, Mapping[str, Decimal]],
    effective_from: datetime,
    currency: str | None = None,
    note: str = "",
) -> PriceVersion:
    """Change prices[model pattern][kind] from `effective_from`: the version starting then is
    updated, or a new one is made as a copy of the version in force then, with these prices
    changed; `note` is added to the version's."""
    unknown = {kind for by_kind in prices.values() for kind in by_kind} - set(Kind.values)
    if unknown:
        raise PricingError(f"unknown price kinds {sorted(unknown)}; use {', '.join(Kind.values)}")
    with transaction.atomic():
        version = PriceVersion.objects.select_for_update().filter(effective_from=effective_from).first()
        if version is None:
            base = PriceVersion.objects.filter(effective_from__lte=effective_from).first()  # newest first
            version = _version_copy(base=base, effective_from=effective_from, currency=currency)
        elif currency and currency != version.currency:
            if version.prices.exclude(model_pattern__in=list(prices)).exists():
                raise PricingError(ONE_CURRENCY.format(base=version, base_currency=version.currency))
            version.currency = currency
            version.save(update_fields=["currency"])
        _prices_put(version=version, prices=prices)
        if note:
            version.note = f"{version.note}\n{note}" if version.note else note
            version.save(update_fields=["note"])
    return version


def _version_copy(*, base: PriceVersion | None, effective_from: datetime, currency: str | None) -> PriceVersion:
    currency = currency or (base.currency if base else Currency.CNY)
    copied = list(base.prices.all()) if base else []
    if base is not None and copied and base.currency != currency:
        raise PricingError(ONE_CURRENCY.format(base=base, base_currency=base.currency))
    version = PriceVersion(effective_from=effective_from, currency=currency, note=f"copy of {base}" if base else "")
    version.full_clean()
    version.save()
    Price.objects.bulk_create(
        Price(version=version, model_pattern=p.model_pattern, kind=p.kind, per_million=p.per_million) for p in copied
    )
    return version


def cost_pool_create(**fields: Any) -> CostPool:
    """A validated cost pool (fields as on CostPool)."""
    pool = CostPool(**fields)
    pool.full_clean()
    pool.save()
    return pool


# --- pricing hours ----------------------------------------------------------------------------


@dataclass
class PricedHours:
    hours: int = 0
    book_rows: int = 0
    pool_rows: int = 0
    pool_hours: int = 0
    pending_pool_hours: int = 0  # pool-priced tokens in hours not yet ended: priced later
    unpriced_rows: int = 0

    def add(self, other: PricedHours) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


# The hours to price again, marked by the trigger on the class rollup (installed by the
# migrations, checked against this declaration) and by hours_mark_dirty: an hour already marked
# is not marked again.
DIRTY = Marks(DirtyHour._meta.db_table, "hour")
DIRTY_TRIGGER = MarkTrigger(DIRTY, "pricing_hours_mark_stale", "pricing_stale", (HourlyClass._meta.db_table,))
_MARK_HOURS = text(DIRTY.mark())
_DIRTY_CLEAR = text(DIRTY.clear())


def hours_mark_dirty(*, hours: Iterable[datetime]) -> None:
    """Note hours to price again for a reason of pricing's own (a price changed from a past
    hour); `dirty_hours_price` prices them within a minute. Hours whose classified tokens
    changed need no call: the trigger on the class rollup marks them (DIRTY_TRIGGER).
    It only appends rows, so concurrent callers never wait on each other."""
    distinct = sorted({hour_floor(h) for h in hours})
    if distinct:
        with connection.cursor() as cursor:
            cursor.execute(_MARK_HOURS, [distinct])


def hours_price(*, start: datetime, end: datetime, book: PriceBook | None = None) -> PricedHours:
    """Recompute HourlyCost, PoolIdleHour and UnpricedHour for the hours in [start, end), one
    transaction per day. Pool allocation happens only for hours that have ended (plus
    POOL_GRACE_MINUTES); the pool rows of later hours are left out until then."""
    if start.tzinfo is None or end.tzinfo is None or start >= end or hour_floor(start) != start:
        raise PricingError(NOT_WHOLE_HOURS)
    if hour_floor(end) != end:
        raise PricingError(NOT_WHOLE_HOURS)
    book = book or price_book_load()
    result = PricedHours()
    day = rollup_day_of(start)
    while rollup_day_start(day) < end:
        hours = [h for i in range(24) if start <= (h := rollup_day_start(day) + i * HOUR) < end]
        result.add(day_price(day=day, hours=hours, book=book))
        day += DAY
    return result


def day_price(*, day: date, hours: list[datetime] | None = None, book: PriceBook) -> PricedHours:
    """Price some hours of one day (all of them by default) in one transaction."""
    hours = hours if hours is not None else [rollup_day_start(day) + i * HOUR for i in range(24)]
    with transaction.atomic(), connection.cursor() as cursor:
        _day_lock(cursor, day)
        cursor.execute(_DIRTY_CLEAR, [hours])
        return _hours_write(cursor, hours, book, pool_ready_before())


def _day_lock(cursor: Any, day: date) -> None:
    xact_lock(cursor, _DAY_LOCK, day.toordinal())


@dataclass
class _Plan:
    """How each (hour, model, component) of the hours is priced."""

    book: list[tuple[datetime, int, int, Decimal, str, int]] = field(default_factory=list)
    pools: dict[tuple[datetime, int], PoolTerms] = field(default_factory=dict)
    unpriced: dict[tuple[datetime, int, str], int] = field(default_factory=lambda: defaultdict(int))
    pending: set[tuple[datetime, int]] = field(default_factory=set)


# What pricing writes of an hour, deleted before the hour is priced again.
_HOURS_DELETE = tuple(
    text(SQL("DELETE FROM {} WHERE hour = ANY(%s)").format(table(model)))
    for model in (HourlyCost, PoolIdleHour, UnpricedHour)
)
# The classified tokens of the hours per model and component, with the model's name.
_PLAN = text(
    SQL(
        "SELECT hc.hour, hc.model_id, m.name, hc.component, SUM(hc.tokens) "
        "FROM {classes} hc JOIN {models} m ON m.id = hc.model_id "
        "WHERE hc.hour = ANY(%s) GROUP BY hc.hour, hc.model_id, m.name, hc.component HAVING SUM(hc.tokens) > 0"
    ).format(classes=table(HourlyClass), models=table(ServedModel))
)
# The cost rollup, declared once: the class rollup's key (summed over rule sets) and the cost of
# its tokens; what priced a row (its currency, and the price version or the pool) is kept beside.
# An hour is priced whole, deleted and written again: no row is ever added to.
_COST_KEY = ("hour", "source_id", "model_id", "dims_id", "reason_id", "component")
COSTS = Rollup(HourlyCost._meta.db_table, _COST_KEY, ("tokens", "cost"))
_BASIS = ("currency", "price_version_id", "pool_id")
# The price book's rows: the classified tokens at the price of each (hour, model, component) sent.
# tokens x per_million x 0.000001 is exact (a division would round to the result's scale).
_BOOK_ROWS = text(
    SQL(
        "INSERT INTO {costs} ({columns}) "
        "SELECT {key}, SUM(hc.tokens), SUM(hc.tokens) * b.per_million * 0.000001, b.currency, b.version_id, NULL "
        "FROM {classes} hc "
        "JOIN unnest(%s::timestamptz[], %s::int[], %s::smallint[], %s::numeric[], %s::text[], %s::bigint[]) "
        "  AS b(hour, model_id, component, per_million, currency, version_id) "
        "  ON hc.hour = b.hour AND hc.model_id = b.model_id AND hc.component = b.component "
        "WHERE hc.hour = ANY(%s) "
        "GROUP BY {key}, b.per_million, b.currency, b.version_id "
        "HAVING SUM(hc.tokens) > 0"
    ).format(
        costs=Identifier(COSTS.table),
        columns=names((*COSTS.columns, *_BASIS)),
        key=names(COSTS.key, "hc"),
        classes=table(HourlyClass),
    )
)
# The class rollup's rows (summed over rule sets) of the ended pool-hours' models, in key order.
_POOL_ROWS = text(
    SQL(
        "SELECT {key}, SUM(tokens) "
        "FROM {classes} WHERE hour = ANY(%s) AND model_id = ANY(%s) "
        "GROUP BY {key} HAVING SUM(tokens) > 0 "
        "ORDER BY {key}"
    ).format(key=names(COSTS.key), classes=table(HourlyClass))
)


def _hours_write(cursor: Any, hours: list[datetime], book: PriceBook, ready_before: datetime) -> PricedHours:
    for statement in _HOURS_DELETE:
        cursor.execute(statement, [hours])
    plan = _plan(cursor, hours, book, ready_before)
    result = PricedHours(hours=len(hours), pending_pool_hours=len({h for h, _ in plan.pending}))
    result.book_rows = _book_rows_insert(cursor, hours, plan)
    result.pool_rows, result.pool_hours = _pool_rows_insert(cursor, hours, plan, book, ready_before)
    # The ledger learns of the changed cost rows by its own trigger on them (ledger_dirtyday).
    result.unpriced_rows = _unpriced_insert(cursor, plan)
    return result


def _plan(cursor: Any, hours: list[datetime], book: PriceBook, ready_before: datetime) -> _Plan:
    cursor.execute(_PLAN, [hours])
    plan = _Plan()
    for hour, model_id, name, component, tokens in cursor.fetchall():
        basis: Basis | None = book.basis(name, hour)
        price = basis.price_of(component) if basis is not None and basis.version is not None else None
        if basis is not None and basis.pool is not None:
            plan.pools[(hour, model_id)] = basis.pool
            if hour >= ready_before:
                plan.pending.add((hour, model_id))
        elif basis is not None and basis.version is not None and price is not None:
            plan.book.append((hour, model_id, component, price, basis.version.currency, basis.version.id))
        else:
            plan.unpriced[(hour, model_id, COMPONENT_KIND[component])] += int(tokens)
    return plan


def _book_rows_insert(cursor: Any, hours: list[datetime], plan: _Plan) -> int:
    if not plan.book:
        return 0
    columns = list(zip(*plan.book, strict=True))
    cursor.execute(_BOOK_ROWS, [*(list(c) for c in columns), hours])
    return int(cursor.rowcount)


def _pool_rows_insert(
    cursor: Any, hours: list[datetime], plan: _Plan, book: PriceBook, ready_before: datetime
) -> tuple[int, int]:
    """Allocate each ended pool-hour's cost to its rows and record the idle remainder."""
    ready = [h for h in hours if h < ready_before]
    rows_by_pool_hour = _pool_rows(cursor, ready, plan)
    costs: list[tuple[Any, ...]] = []
    idle: list[tuple[Any, ...]] = []
    for hour in ready:
        for pool in (p for p in book.pools if p.active_at(hour)):
            rows = rows_by_pool_hour.get((pool.id, hour), [])
            split = allocate(
                pool_cost=pool.hourly_cost,
                weights=[tokens * pool.weight(key[5]) for key, tokens in rows],
                capacity=pool.capacity,
                places=pool.places,
            )
            for (key, tokens), cost in zip(rows, split.parts, strict=True):
                costs.append((*key, tokens, cost, pool.currency, pool.id))
            cost_of_hour = (pool.hourly_cost, split.allocated, split.idle, split.used, split.utilisation)
            idle.append((pool.id, hour, pool.currency, *cost_of_hour))
    _unnest_insert(cursor, COSTS.table, _POOL_COST_COLUMNS, costs)
    _unnest_insert(cursor, PoolIdleHour._meta.db_table, _IDLE_COLUMNS, idle)
    return len(costs), len(idle)


# A pool's rows: the cost rollup's columns, and the pool that priced them.
_POOL_COST_COLUMNS = (
    *zip(
        COSTS.columns,
        ("timestamptz", "bigint", "int", "int", "smallint", "smallint", "bigint", "numeric"),
        strict=True,
    ),
    ("currency", "text"),
    ("pool_id", "bigint"),
)
_IDLE_COLUMNS = (
    ("pool_id", "bigint"),
    ("hour", "timestamptz"),
    ("currency", "text"),
    ("pool_cost", "numeric"),
    ("allocated", "numeric"),
    ("idle", "numeric"),
    ("weighted_tokens", "numeric"),
    ("utilisation", "numeric"),
)
_UNPRICED_COLUMNS = (("hour", "timestamptz"), ("model_id", "int"), ("kind", "text"), ("tokens", "bigint"))


def _unnest_insert(
    cursor: Any, table_name: str, columns: tuple[tuple[str, str], ...], rows: list[tuple[Any, ...]]
) -> None:
    """Insert rows in one statement: a column array per column, unnested. The arrays go bound
    server side in binary (in the cursor's transaction): Django's cursor would quote every
    element into the SQL, the largest Python cost of inserting a day's pool rows."""
    if not rows:
        return
    cursor.db.ensure_connection()
    with psycopg.Cursor(cursor.db.connection) as bound:
        bound.execute(_unnest_statement(table_name, columns), [list(c) for c in zip(*rows, strict=True)])


@cache
def _unnest_statement(table_name: str, columns: tuple[tuple[str, str], ...]) -> str:
    return text(unnest_insert(table_name, columns))


def _pool_rows(
    cursor: Any, ready: list[datetime], plan: _Plan
) -> dict[tuple[int, datetime], list[tuple[tuple[Any, ...], int]]]:
    """The HourlyClass rows (summed over rule sets) of each ended pool-hour, in key order."""
    wanted = {(h, m): pool for (h, m), pool in plan.pools.items() if (h, m) not in plan.pending}
    grouped: dict[tuple[int, datetime], list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
    if not wanted:
        return grouped
    cursor.execute(_POOL_ROWS, [ready, sorted({m for _, m in wanted})])
    for row in cursor.fetchall():
        pool = wanted.get((row[0], row[2]))
        if pool is not None:
            grouped[(pool.id, row[0])].append((tuple(row[:6]), int(row[6])))
    return grouped


def _unpriced_insert(cursor: Any, plan: _Plan) -> int:
    rows = [(*key, tokens) for key, tokens in sorted(plan.unpriced.items())]
    _unnest_insert(cursor, UnpricedHour._meta.db_table, _UNPRICED_COLUMNS, rows)
    return len(rows)


# --- fresh data: dirty hours and ended pool hours ---------------------------------------------


@dataclass
class DirtyHours(MarkConsumer[date, PricedHours]):
    """The hours marked dirty and the ended pool-hours not allocated yet (PoolIdleHour), priced
    a (rollup) day per transaction under the day's lock: the day's marks taken first, so a mark
    written meanwhile is priced with them or stays for the next run."""

    marks = DIRTY
    clear = Clear.TAKE
    ready_before: datetime = field(default_factory=pool_ready_before)
    book: PriceBook | None = None

    def unit(self, mark: datetime) -> date:
        return rollup_day_of(mark)

    def span(self, unit: date) -> tuple[datetime, datetime]:
        return rollup_day_start(unit), rollup_day_start(unit) + DAY

    def lock(self, unit: date) -> tuple[int, int]:
        return _DAY_LOCK, unit.toordinal()

    def extra(self, marks: list[datetime]) -> list[datetime]:
        return _pool_hours_pending(self.ready_before)

    def begin(self, units: list[date]) -> None:
        self.book = price_book_load()

    def work(self, unit: date, values: list[datetime]) -> PricedHours:
        assert self.book is not None
        with connection.cursor() as cursor:
            return _hours_write(cursor, values, self.book, self.ready_before)


def dirty_hours_price(*, max_days: int = 7) -> PricedHours:
    """Price the hours marked dirty and the ended pool-hours not allocated yet, oldest days
    first, at most `max_days` days per call (the rest on the next call)."""
    result = PricedHours()
    for priced in DirtyHours().run(limit=max_days).results:
        result.add(priced)
    return result


_POOL_HOURS_PENDING = text(
    SQL(
        "SELECT DISTINCT h FROM {pools} p CROSS JOIN LATERAL generate_series("
        "  p.effective_from, LEAST(COALESCE(p.effective_to, %(ready)s), %(ready)s) - interval '1 hour',"
        "  interval '1 hour') AS h "
        "WHERE NOT EXISTS (SELECT 1 FROM {idle} i WHERE i.pool_id = p.id AND i.hour = h)"
    ).format(pools=table(CostPool), idle=table(PoolIdleHour))
)


def _pool_hours_pending(ready_before: datetime) -> list[datetime]:
    """Ended hours in some pool's range that have no allocation yet (PoolIdleHour row)."""
    with connection.cursor() as cursor:
        cursor.execute(_POOL_HOURS_PENDING, {"ready": ready_before})
        return sorted(h.astimezone(UTC) for (h,) in cursor.fetchall())


# --- reprice ----------------------------------------------------------------------------------

RUN_KIND = "reprice"  # JobRun.kind of reprice runs
# Days a reprice run prices at the same time, each in its own transaction on its own connection.
# They commit in day order, so a run's progress means what it means when they run one by one.
REPRICE_WORKERS = 2


def reprice_run(*, start: date, end: date, progress: Progress | None = None) -> JobRun:
    """Recompute the days in [start, end), a day per transaction, through the resumable runner
    (apps.common.dayrun), REPRICE_WORKERS days at a time: after a crash the same call resumes at
    the first day not done; once a run is done, the same call starts a new one (and gives the
    same result)."""
    if end <= start:
        raise PricingError("end must be after start")
    book = price_book_load()

    def work(day: date) -> None:
        day_price(day=day, book=book)

    return jobrun_run(kind=RUN_KIND, start=start, end=end, work=work, progress=progress, workers=REPRICE_WORKERS)
