"""Daily accrual: the journal brought in line with the priced rows, idempotently.

For each day, the *target* is computed from HourlyCost (usage, by mapping rule) and
PoolIdleHour (idle capacity, shared out among cost centres by the month's idle policy:
apps/ledger/idle/allocation.py): exact amounts per (currency, account, cost centre, model or
pool), rounded to the currency's minor unit with the month's rounding carry (see
apps/ledger/rounding.py). Then, per currency:

- lines of the day already in *closed* periods are fixed;
- the rest, target - fixed, is held by one entry: the day's accrual entry when its month is
  open, else an adjusting entry in the earliest open month after it, labelled with the month
  it adjusts. Entries of the day in other open months are removed. An entry whose lines are
  already right is left alone, so a rerun changes nothing.

A month is processed day by day in order (each day in its own transaction), skipping days
whose fingerprint (the count and largest id of their priced rows, and the mapping config
version) is unchanged, unless an earlier day's change moved the rounding carry enough to
change the day's amount.

Currencies: the journal is kept in the functional currency (LEDGER_FUNCTIONAL_CURRENCY). A
priced row in another currency is converted at its day's rate (apps/currencies/rates.py)
and booked on a line of its own that keeps the original amount, currency, rate and source; when
the day has no rate for that currency, its cost is left unbooked and noted as a MissingRate
(never booked as zero), and the day's fingerprint holds its rates, so entering the rate books it.

Days and months are those of the accounting time zone (apps/common/buckets.py); the priced
rows are UTC hours, and a local day is the hours between its two local midnights. A closed
month keeps the zone it was closed in (Period.tz): its days are still computed in that zone,
and the open month next to it starts or ends where it ends or starts, so no hour is booked
twice or lost when the zone changes. Open months follow the current zone: `books_zone_sync`
marks them dirty when it changed, and each day's fingerprint holds its bounds, so all their
days are computed again.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.db import connection, transaction
from django.utils import timezone

from apps.classification.models import Reason
from apps.common.buckets import (
    accounting_zone,
    day_end,
    day_of,
    day_start,
    month_days,
    month_of,
    next_month,
    previous_month,
    zone_name,
)
from apps.common.composed import SQL, table, text
from apps.common.dayrun import jobrun_run
from apps.common.db import xact_lock
from apps.common.hourgrid import grid_check
from apps.common.markrun import Clear, MarkConsumer, Read
from apps.common.rollup import Marks, MarkTrigger
from apps.currencies.models import MissingRate
from apps.currencies.rates import DayRate, functional_currency, rates_between
from apps.ingest.models import DimSet
from apps.ledger import conf
from apps.ledger.idle.allocation import SHOWBACK, IdleLine, idle_lines, idle_parts, policy_in_force
from apps.ledger.mapping import Mapping, mapping_load
from apps.ledger.models import AccrualDay, DirtyDay, ElasticWindow, JournalEntry, JournalLine, Period
from apps.ledger.rounding import day_amount, largest_remainder
from apps.pricing.models import MINOR_UNITS, HourlyCost, PoolIdleHour

DAY = timedelta(days=1)
_MONTH_LOCK = 0x4C454447  # advisory lock namespace: (namespace, month ordinal) serialises a month's accrual

# The days to book again (UTC dates), marked by the trigger on pricing's rollups and by
# days_mark_dirty; recent_accrue reads the marks up to the latest and clears those it read.
DIRTY = Marks(DirtyDay._meta.db_table, "day", type="date")
DIRTY_TRIGGER = MarkTrigger(
    DIRTY, "ledger_days_mark_stale", "ledger_stale", (HourlyCost._meta.db_table, PoolIdleHour._meta.db_table)
)
_MARK_DAYS = text(DIRTY.mark())
_DIRTY_WITHIN = text(DIRTY.marked(within=True))


def days_mark_dirty(*, days: Iterable[date]) -> None:
    """Note days to book again for a reason of the ledger's own (a day's exchange rate, a month's
    zone); the next recent_accrue books their months and the months around. Days whose priced
    rows changed need no call: the trigger on pricing's rollups marks them (DIRTY_TRIGGER)."""
    distinct = sorted(set(days))
    if distinct:
        with connection.cursor() as cursor:
            cursor.execute(_MARK_DAYS, [distinct])


@dataclass(frozen=True)
class MonthWindow:
    """The instants [start, end) a month's journal books, and the zone of its days."""

    month: date
    zone: ZoneInfo
    start: datetime
    end: datetime

    def bounds(self, day: date) -> tuple[datetime, datetime]:
        """A day's instants; the first and last days reach the month's edges (which a closed
        neighbour in another zone may have moved)."""
        days = month_days(self.month)
        start = self.start if day == days[0] else max(day_start(day, self.zone), self.start)
        end = self.end if day == days[-1] else min(day_end(day, self.zone), self.end)
        return start, max(start, end)


def month_window(month: date) -> MonthWindow:
    """Where a month begins and ends: a closed month keeps its edges in the zone it was closed
    in; an edge between two open months is midnight in the accounting zone."""
    around = (previous_month(month), month, next_month(month))
    periods = {p.month: p for p in Period.objects.filter(month__in=around)}
    mine = periods.get(month)
    zone = ZoneInfo(mine.tz) if mine is not None and mine.status == Period.Status.CLOSED else accounting_zone()
    return MonthWindow(month, zone, _edge(month, periods), _edge(next_month(month), periods))


def _edge(month: date, periods: dict[date, Period]) -> datetime:
    """The instant `month` begins: where the closed month before it ended, else where it
    begins itself if closed, else local midnight now."""
    for period in (periods.get(previous_month(month)), periods.get(month)):
        if period is not None and period.status == Period.Status.CLOSED:
            return day_start(month, ZoneInfo(period.tz))
    return day_start(month, accounting_zone())


@dataclass(frozen=True, order=True)
class LineKey:
    account_id: int
    cost_centre: str
    model_id: int | None
    pool_id: int | None
    original: str = ""  # the currency it was priced in, when not the functional one

    def sort_key(self) -> tuple[int, str, int, int, str]:
        return (self.account_id, self.cost_centre, self.model_id or 0, self.pool_id or 0, self.original)


@dataclass(frozen=True)
class Original:
    """A converted line's amount as priced (signed like the line), and the rate that converted it."""

    currency: str
    amount: Decimal
    rate: Decimal
    source: str

    def minus(self, other: Original | None) -> Original:
        return self if other is None else Original(self.currency, self.amount - other.amount, self.rate, self.source)


@dataclass
class Part:
    """A line's amount (signed: debit > 0 on an expense account), tokens and basis."""

    amount: Decimal
    tokens: int
    basis: dict[str, Any] = field(default_factory=dict)
    original: Original | None = None


@dataclass
class _Acc:
    exact: Decimal = Decimal(0)
    tokens: int = 0
    reasons: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    price_versions: set[int] = field(default_factory=set)
    pools: set[int] = field(default_factory=set)
    windows: set[int] = field(default_factory=set)
    rules: set[str] = field(default_factory=set)
    dims: dict[str, str] | None = None  # the dims every row of the line shares
    idle_hours: int = 0
    # An idle line under a policy that shares idle out: the policy, and of `exact` the part it gave
    # this cost centre (the rest is the platform's own).
    idle_policy: str = ""
    idle_allocated: Decimal = Decimal(0)
    original: Original | None = None  # the line's cost as priced, when converted

    def original_add(self, currency: str, amount: Decimal, rate: DayRate) -> None:
        had = self.original.amount if self.original else Decimal(0)
        self.original = Original(currency, had + amount, rate.rate, rate.source)

    def share_dims(self, dims: dict[str, str]) -> None:
        self.dims = dict(dims) if self.dims is None else {k: v for k, v in self.dims.items() if dims.get(k) == v}

    def basis(self) -> dict[str, Any]:
        basis: dict[str, Any] = {"exact": str(self.exact), "rules": sorted(self.rules)}
        if self.dims is not None:
            basis["dims"] = dict(sorted(self.dims.items()))
        if self.reasons:
            basis["reasons"] = dict(sorted(self.reasons.items()))
        for name in ("price_versions", "pools", "windows"):
            if getattr(self, name):
                basis[name] = sorted(getattr(self, name))
        if self.idle_hours:
            basis["idle_hours"] = self.idle_hours
        if self.idle_policy:
            basis["idle_policy"] = self.idle_policy
            basis["idle_allocated"] = str(self.idle_allocated)
        return basis


@dataclass
class DayTarget:
    """A day's exact totals and unrounded lines, per currency."""

    day: date
    exact: dict[str, Decimal] = field(default_factory=dict)
    lines: dict[str, dict[LineKey, _Acc]] = field(default_factory=dict)
    # Per currency without a rate that day: (cost as priced, tokens), left unbooked.
    missing: dict[str, tuple[Decimal, int]] = field(default_factory=dict)

    def miss(self, currency: str, amount: Decimal, tokens: int) -> None:
        had = self.missing.get(currency, (Decimal(0), 0))
        self.missing[currency] = (had[0] + amount, had[1] + tokens)


# The priced hours (c) with their dimensions (d), reason (r) and the elastic window (w.window_id)
# each falls in: what booking reads and what a line's drill-down shows, joined one way.
PRICED_HOURS_FROM = SQL(
    """
FROM {costs} c
JOIN {dims} d ON d.id = c.dims_id
JOIN {reasons} r ON r.id = c.reason_id
LEFT JOIN LATERAL (
    SELECT min(ew.id) AS window_id FROM {windows} ew
    WHERE ew.business_line = d.business_line AND ew.start <= c.hour AND c.hour < ew."end"
) w ON TRUE
"""
).format(costs=table(HourlyCost), dims=table(DimSet), reasons=table(Reason), windows=table(ElasticWindow))

# {rule}: the mapping's rule of a row (Mapping.usage_sql); {priced}: PRICED_HOURS_FROM.
_USAGE_SQL = SQL(
    """
SELECT c.currency, COALESCE(NULLIF(d.business_line, ''), %s) AS cc, c.model_id, {rule} AS rule_id, r.name,
       SUM(c.tokens), SUM(c.cost),
       array_agg(DISTINCT c.price_version_id) FILTER (WHERE c.price_version_id IS NOT NULL),
       array_agg(DISTINCT c.pool_id) FILTER (WHERE c.pool_id IS NOT NULL),
       array_agg(DISTINCT w.window_id) FILTER (WHERE w.window_id IS NOT NULL),
       array_agg(DISTINCT c.dims_id){priced}WHERE c.hour >= %s AND c.hour < %s
GROUP BY 1, 2, 3, 4, 5
"""
)


@contextmanager
def analytic_cursor() -> Iterator[Any]:
    """A cursor in a transaction set up for one large aggregate: no JIT (compiling costs more
    than it saves on a day's rows) and room to sort in memory."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute("SET LOCAL work_mem = '64MB'")
        yield cursor


_EXACT = Decimal(1).scaleb(-12)  # the cost rollup's precision: a converted amount keeps it


class _Converter:
    """Costs of a day into the functional currency at the day's rates; None (and noted on the
    target as missing) for a currency the day has no rate of."""

    def __init__(self, target: DayTarget, rates: dict[str, DayRate]) -> None:
        self.target, self.rates, self.functional = target, rates, functional_currency()

    def __call__(self, currency: str, amount: Decimal, tokens: int) -> tuple[Decimal, DayRate | None] | None:
        if currency == self.functional:
            return amount, None
        rate = self.rates.get(currency)
        if rate is None:
            self.target.miss(currency, amount, tokens)
            return None
        return (amount * rate.rate).quantize(_EXACT, ROUND_HALF_EVEN), rate


def day_target(
    *,
    day: date,
    mapping: Mapping,
    window: MonthWindow | None = None,
    rates: dict[str, DayRate] | None = None,
    bounds: tuple[datetime, datetime] | None = None,
) -> DayTarget:
    """The exact lines of a day from its priced rows (two set-based queries), in the functional
    currency (`rates`: the day's, read when not given); `bounds`: of the day's hours, only those
    (what a window that cuts the day would book of it, apps/ledger/figures.py)."""
    target = DayTarget(day=day)
    if rates is None:
        rates = rates_between(start=day, end=day + DAY).get(day, {})
    convert = _Converter(target, rates)
    start, end = bounds or (window or month_window(month_of(day))).bounds(day)
    with analytic_cursor() as cursor:
        cursor.execute(
            text(_USAGE_SQL.format(rule=mapping.usage_sql, priced=PRICED_HOURS_FROM)),
            [conf.get("LEDGER_UNASSIGNED"), *mapping.usage_params, start, end],
        )
        usage = cursor.fetchall()
        idle = idle_lines(idle_parts(start=start, end=end, month=month_of(day), cursor=cursor))
    dims = _dims_of({i for row in usage for i in row[10]})
    for currency, cc, model_id, rule_id, reason, tokens, cost, versions, pools, windows, dims_ids in usage:
        if (converted := convert(currency, cost, int(tokens))) is None:
            continue
        key = LineKey(mapping.account_of(rule_id), cc, model_id, None, _foreign(currency, converted[1]))
        acc = _acc(target, convert.functional, key, converted[0])
        _original_add(acc, currency, cost, converted[1])
        acc.tokens += int(tokens)
        acc.reasons[reason] += int(tokens)
        acc.price_versions.update(versions or ())
        acc.pools.update(pools or ())
        acc.windows.update(windows or ())
        acc.rules.add(mapping.label_of(rule_id))
        for dims_id in dims_ids:
            acc.share_dims(dims[dims_id])
    policy = policy_in_force(month_of(day))
    for line in idle:
        _idle_add(target, convert, mapping, line, policy)
    return target


def _idle_add(target: DayTarget, convert: _Converter, mapping: Mapping, line: IdleLine, policy: str) -> None:
    """A cost centre's idle of a pool on the idle account: under a policy that shares idle out,
    its basis names the policy and the part given to it (apps/ledger/idle/allocation.py)."""
    if (converted := convert(line.currency, line.amount, 0)) is None:
        return
    account = mapping.idle_rule.account_id if mapping.idle_rule else mapping.fallback_account_id
    key = LineKey(account, line.cost_centre, None, line.pool_id, _foreign(line.currency, converted[1]))
    acc = _acc(target, convert.functional, key, converted[0])
    _original_add(acc, line.currency, line.amount, converted[1])
    acc.pools.add(line.pool_id)
    acc.idle_hours += line.hours
    acc.rules.add(mapping.idle_rule.label if mapping.idle_rule else "fallback")
    if policy != SHOWBACK:
        acc.idle_policy = policy
        rate = converted[1].rate if converted[1] is not None else Decimal(1)
        acc.idle_allocated += (line.allocated * rate).quantize(_EXACT, ROUND_HALF_EVEN)


def _foreign(currency: str, rate: DayRate | None) -> str:
    return currency if rate is not None else ""


def _original_add(acc: _Acc, currency: str, amount: Decimal, rate: DayRate | None) -> None:
    if rate is not None:
        acc.original_add(currency, amount, rate)


def _dims_of(ids: set[int]) -> dict[int, dict[str, str]]:
    return dict(DimSet.objects.filter(id__in=ids).values_list("id", "dims")) if ids else {}


def _acc(target: DayTarget, currency: str, key: LineKey, exact: Decimal) -> _Acc:
    acc = target.lines.setdefault(currency, {}).setdefault(key, _Acc())
    acc.exact += exact
    target.exact[currency] = target.exact.get(currency, Decimal(0)) + exact
    return acc


def target_round(*, target: DayTarget, carry: dict[str, Decimal]) -> dict[str, dict[LineKey, Part]]:
    """The day's lines in minor units: the day's share of the month's cumulative rounding,
    split over the lines by largest remainder (in key order for ties)."""
    rounded: dict[str, dict[LineKey, Part]] = {}
    for currency, lines in target.lines.items():
        places = MINOR_UNITS[currency]  # type: ignore[index]
        keys = sorted(lines, key=LineKey.sort_key)
        total = day_amount(carry=carry.get(currency, Decimal(0)), exact=target.exact[currency], places=places)
        amounts = largest_remainder([lines[k].exact for k in keys], total, places)
        rounded[currency] = {
            k: Part(a, lines[k].tokens, lines[k].basis(), lines[k].original) for k, a in zip(keys, amounts, strict=True)
        }
    return rounded


# --- posting ------------------------------------------------------------------------------------


@dataclass
class DayResult:
    day: date
    written: int = 0  # entries inserted
    removed: int = 0  # entries deleted
    unchanged: int = 0


_PERIOD_OPEN = text(
    SQL("INSERT INTO {} (month, status, tz) VALUES (%s, 'open', %s) ON CONFLICT (month) DO NOTHING").format(
        table(Period)
    )
)
_PERIOD_STATUS = text(SQL("SELECT status FROM {} WHERE month = %s FOR SHARE").format(table(Period)))


# The rows of the priced hours and of the pool-hours by local day (the fingerprint's parts): the
# local date held to the month's days, the edge hours a closed neighbour's zone gives this month
# belonging to its first or last day (see MonthWindow.bounds).
_ROWS_BY_DAY = tuple(
    text(
        SQL(
            "SELECT LEAST(GREATEST((hour AT TIME ZONE %s)::date, %s), %s), count(*), max(id) FROM {} "
            "WHERE hour >= %s AND hour < %s GROUP BY 1"
        ).format(table(model))
    )
    for model in (HourlyCost, PoolIdleHour)
)


def _period_lock(cursor: Any, month: date) -> str:
    """The period's status, its row locked FOR SHARE (a close waits for us, or we see it)."""
    cursor.execute(_PERIOD_OPEN, [month, zone_name()])
    cursor.execute(_PERIOD_STATUS, [month])
    return str(cursor.fetchone()[0])


def _home(cursor: Any, day: date) -> tuple[date, str]:
    """Where the day's movable lines go: its own month if open, else the first open month after it."""
    month = month_of(day)
    if _period_lock(cursor, month) == Period.Status.OPEN:
        return month, JournalEntry.Kind.ACCRUAL
    while True:
        month = next_month(month)
        if _period_lock(cursor, month) == Period.Status.OPEN:
            return month, JournalEntry.Kind.ADJUSTMENT


def month_lock(cursor: Any, month: date) -> None:
    xact_lock(cursor, _MONTH_LOCK, month.toordinal())


def day_post(
    *,
    day: date,
    rounded: dict[str, dict[LineKey, Part]],
    mapping: Mapping,
    basis: dict[str, Any],
    missing: dict[str, tuple[Decimal, int]] | None = None,
) -> DayResult:
    """Make the journal of `day` hold `rounded` (see the module docstring), and its noted
    missing rates be `missing`, in one transaction."""
    result = DayResult(day)
    with transaction.atomic(), connection.cursor() as cursor:
        month_lock(cursor, month_of(day))
        _missing_note(day, missing or {})
        home, kind = _home(cursor, day)
        # Bill adjustments (apps/reconciliation/) explain a supplier's bill, not priced rows.
        entries = list(
            JournalEntry.objects.filter(day=day).exclude(kind=JournalEntry.Kind.BILL).select_related("period")
        )
        fixed = _fixed_parts(day, mapping)
        for currency in sorted(set(rounded) | set(fixed) | {e.currency for e in entries}):
            want = _subtract(rounded.get(currency, {}), fixed.get(currency, {}))
            movable = [e for e in entries if e.currency == currency and e.period.status == Period.Status.OPEN]
            lines = _lines(want, mapping.payable_account_id, adjusts=None if kind == "accrual" else month_of(day))
            if _already(movable, home, kind, lines):
                result.unchanged += 1
                continue
            for entry in movable:
                entry.delete()
                result.removed += 1
            if lines:
                _entry_insert(day, currency, home, kind, lines, basis)
                result.written += 1
    return result


def _missing_note(day: date, missing: dict[str, tuple[Decimal, int]]) -> None:
    """The day's costs left unbooked for want of a rate, as they stand now."""
    MissingRate.objects.filter(day=day).delete()
    to = functional_currency()
    MissingRate.objects.bulk_create(
        MissingRate(day=day, currency=c, to=to, amount=amount, tokens=tokens)
        for c, (amount, tokens) in sorted(missing.items())
    )


def _fixed_parts(day: date, mapping: Mapping) -> dict[str, dict[LineKey, Part]]:
    """Per currency, the expense lines of the day in closed periods, summed by key."""
    fixed: dict[str, dict[LineKey, Part]] = defaultdict(dict)
    rows = (
        JournalLine.objects.filter(day=day, period__status=Period.Status.CLOSED)
        .exclude(account_id=mapping.payable_account_id)
        .exclude(entry__kind=JournalEntry.Kind.BILL)
        .values_list(
            "currency",
            "account_id",
            "cost_centre",
            "model_id",
            "pool_id",
            "debit",
            "credit",
            "tokens",
            *ORIGINAL_COLUMNS,
        )
    )
    for currency, account, cc, model, pool, debit, credit, tokens, *original in rows:
        key = LineKey(account, cc, model, pool, original[0] or "")
        part = fixed[currency].setdefault(key, Part(Decimal(0), 0))
        part.amount += debit - credit
        part.tokens += tokens
        if original[0]:
            had = part.original.amount if part.original else Decimal(0)
            part.original = Original(original[0], had + original[1], original[2], original[3])
    return fixed


def _subtract(target: dict[LineKey, Part], fixed: dict[LineKey, Part]) -> dict[LineKey, Part]:
    want = {}
    for key in set(target) | set(fixed):
        have = fixed.get(key, Part(Decimal(0), 0))
        goal = target.get(key, Part(Decimal(0), 0, {"exact": "0", "rules": []}))
        original = _original_minus(goal.original, have.original)
        want[key] = Part(goal.amount - have.amount, goal.tokens - have.tokens, goal.basis, original)
    return want


def _original_minus(goal: Original | None, have: Original | None) -> Original | None:
    if goal is not None:
        return goal.minus(have)
    if have is not None:  # booked in a closed month, gone now: its reversal at the rate it was booked
        return Original(have.currency, -have.amount, have.rate, have.source)
    return None


# A line as compared and written: (account, cost centre, model, pool, debit, credit, tokens,
# basis json, original currency, original amount, rate, rate source)
LineRow = tuple[
    int, str, int | None, int | None, Decimal, Decimal, int, str, str | None, Decimal | None, Decimal | None, str | None
]
ORIGINAL_COLUMNS = ("original_currency", "original_amount", "rate", "rate_source")


def _original_cols(original: Original | None) -> tuple[str | None, Decimal | None, Decimal | None, str | None]:
    if original is None:
        return (None, None, None, None)
    return (original.currency, original.amount, original.rate, original.source)


def _lines(want: dict[LineKey, Part], payable_id: int, adjusts: date | None) -> list[LineRow]:
    """Expense lines (debit the cost) and payable lines (credit it) per cost centre and model."""
    rows: list[LineRow] = []
    payable: dict[tuple[str, int | None, int | None, str], Part] = {}
    for key in sorted(want, key=LineKey.sort_key):
        part = want[key]
        if not part.amount and not part.tokens and not (part.original and part.original.amount):
            continue
        basis = part.basis | ({"adjusts": adjusts.strftime("%Y-%m")} if adjusts else {})
        cols = _original_cols(part.original)
        rows.append((*_key_cols(key), *_sides(part.amount), part.tokens, json.dumps(basis, sort_keys=True), *cols))
        owed = payable.setdefault((key.cost_centre, key.model_id, key.pool_id, key.original), Part(Decimal(0), 0))
        owed.amount += part.amount
        if part.original is not None:  # the payable owes the priced amount (signed as a credit)
            had = owed.original.amount if owed.original else Decimal(0)
            owed.original = Original(part.original.currency, had - part.original.amount, *_rate_of(part.original))
    for (cc, model, pool, _), owed in sorted(payable.items(), key=lambda kv: _payable_order(kv[0])):
        if owed.amount or (owed.original and owed.original.amount):
            credit, debit = _sides(owed.amount)
            rows.append((payable_id, cc, model, pool, debit, credit, 0, "{}", *_original_cols(owed.original)))
    return rows


def _rate_of(original: Original) -> tuple[Decimal, str]:
    return original.rate, original.source


def _payable_order(key: tuple[str, int | None, int | None, str]) -> tuple[str, int, int, str]:
    return (key[0], key[1] or 0, key[2] or 0, key[3])


def _key_cols(key: LineKey) -> tuple[int, str, int | None, int | None]:
    return (key.account_id, key.cost_centre, key.model_id, key.pool_id)


def _sides(amount: Decimal) -> tuple[Decimal, Decimal]:
    """(debit, credit) of a signed amount."""
    return (amount, Decimal(0)) if amount > 0 else (Decimal(0), -amount)


def _already(movable: list[JournalEntry], home: date, kind: str, lines: list[LineRow]) -> bool:
    if not movable:
        return not lines
    if len(movable) != 1 or movable[0].period_id != home or movable[0].kind != kind:
        return False
    stored = movable[0].lines.values_list(
        "account_id", "cost_centre", "model_id", "pool_id", "debit", "credit", "tokens", "basis", *ORIGINAL_COLUMNS
    )
    return sorted(((*r[:7], json.dumps(r[7], sort_keys=True), *r[8:]) for r in stored), key=_row_order) == sorted(
        lines, key=_row_order
    )


def _row_order(row: LineRow) -> tuple[Any, ...]:
    return (row[0], row[1], row[2] or 0, row[3] or 0, *row[4:8], row[8] or "", row[9] or 0)


def _entry_insert(day: date, currency: str, home: date, kind: str, lines: list[LineRow], basis: dict[str, Any]) -> None:
    adjusts = month_of(day) if kind == JournalEntry.Kind.ADJUSTMENT else None
    memo = f"Adjusts {adjusts:%Y-%m}: {day} re-priced or re-classified after close" if adjusts else f"Accrual {day}"
    entry = JournalEntry.objects.create(
        kind=kind, period_id=home, day=day, adjusts=adjusts, currency=currency, memo=memo, basis=basis
    )
    JournalLine.objects.bulk_create(
        JournalLine(
            entry=entry,
            period_id=home,
            day=day,
            account_id=account,
            cost_centre=cc,
            model_id=model,
            pool_id=pool,
            currency=currency,
            debit=debit,
            credit=credit,
            tokens=tokens,
            basis=json.loads(basis_json),
            original_currency=original_currency,
            original_amount=original_amount,
            rate=rate,
            rate_source=rate_source,
        )
        for account, cc, model, pool, debit, credit, tokens, basis_json, *original in lines
        for original_currency, original_amount, rate, rate_source in [original]
    )


# --- months -------------------------------------------------------------------------------------


@dataclass
class MonthResult:
    month: date
    days_computed: int = 0
    days_skipped: int = 0
    entries_written: int = 0
    entries_removed: int = 0

    def add(self, day: DayResult) -> None:
        self.days_computed += 1
        self.entries_written += day.written
        self.entries_removed += day.removed


def _fingerprints(window: MonthWindow, version: int, only: list[date] | None = None) -> dict[date, str]:
    """Per day: the count and largest id of its priced and idle rows (pricing rewrites an hour
    by delete + insert, so any change moves them), the mapping config version, the day's
    bounds in UTC hours (a change of zone or of a neighbour's close moves them), and the
    functional currency with the day's rates into it (entering or changing one moves them).
    `only`: of those days alone (the rows of the hours from the first one's start to the last
    one's end are read)."""
    days = month_days(window.month)
    start, end = window.start, window.end
    if only:
        start, end = max(start, window.bounds(min(only))[0]), min(end, window.bounds(max(only))[1])
    parts: dict[date, list[str]] = defaultdict(lambda: ["-", "-"])
    with analytic_cursor() as cursor:
        for i, statement in enumerate(_ROWS_BY_DAY):
            cursor.execute(statement, [window.zone.key, days[0], days[-1], start, end])
            for day, count, max_id in cursor.fetchall():
                parts[day][i] = f"{count}:{max_id}"
    rates = rates_between(start=days[0], end=days[-1] + DAY)
    return {
        day: f"v{version}|{_hours(window.bounds(day))}|{p[0]}|{p[1]}|{_rates_print(rates.get(day, {}))}"
        for day, p in parts.items()
        if only is None or day in only
    }


def booked_days(days: list[date]) -> set[date]:
    """Of `days` (ascending), those the journal holds as their priced rows stand: booked from the
    fingerprint they have now. Only the days a pricing change marked (DirtyDay: a UTC date, so the
    days around it too) have their fingerprint computed again; the others are as booked."""
    if not days:
        return set()
    version = mapping_load().version
    stored = dict(AccrualDay.objects.filter(day__gte=days[0], day__lte=days[-1]).values_list("day", "fingerprint"))
    with connection.cursor() as cursor:
        cursor.execute(_DIRTY_WITHIN, [days[0] - DAY, days[-1] + DAY])
        marks = {day for (day,) in cursor.fetchall()}
    booked = {d for d in days if d in stored and stored[d].startswith(f"v{version}|")}
    marked = sorted(d for d in booked if {d - DAY, d, d + DAY} & marks)
    for month in sorted({month_of(d) for d in marked}):
        mine = [d for d in marked if month_of(d) == month]
        now = _fingerprints(month_window(month), version, only=mine)
        booked -= {d for d in mine if now.get(d, "") != stored[d]}
    return booked


def _rates_print(rates: dict[str, DayRate]) -> str:
    """The functional currency and a short digest of the day's rates and sources (a source is
    free text: the digest keeps the fingerprint within its column)."""
    text = "".join(f"{c}={r.rate.normalize()}:{r.source}\n" for c, r in sorted(rates.items()))
    return functional_currency() + (f":{hashlib.sha256(text.encode()).hexdigest()[:16]}" if text else "")


def _hours(bounds: tuple[datetime, datetime]) -> str:
    return "-".join(str(int(b.timestamp()) // 3600) for b in bounds)


def month_accrue(*, month: date, force: bool = False) -> MonthResult:
    """Bring the journal of every day of `month` in line with its priced rows."""
    month = month_of(month)
    mapping = mapping_load()
    window = month_window(month)
    prints = _fingerprints(window, mapping.version)
    stored = {a.day: a for a in AccrualDay.objects.filter(day__gte=month, day__lt=next_month(month))}
    rates = rates_between(start=month, end=next_month(month))
    result = MonthResult(month)
    # The rounding carry now, and as the stored days were booked (the exact totals stored before this run).
    carry: dict[str, Decimal] = defaultdict(Decimal)
    booked_carry: dict[str, Decimal] = defaultdict(Decimal)
    for day in month_days(month):
        fingerprint, state = prints.get(day, ""), stored.get(day)
        previous = {c: Decimal(v) for c, v in (state.exact if state else {}).items()}
        empty = state is None and not fingerprint  # nothing priced, nothing booked
        unchanged = (
            state is not None and state.fingerprint == fingerprint and _same_share(previous, carry, booked_carry)
        )
        if empty or (unchanged and not force):
            _carry_add(carry, previous)
            _carry_add(booked_carry, previous)
            result.days_skipped += 1
            continue
        target = day_target(day=day, mapping=mapping, window=window, rates=rates.get(day, {}))
        basis = {"config_version": mapping.version, "fingerprint": fingerprint}
        rounded = target_round(target=target, carry=carry)
        result.add(day_post(day=day, rounded=rounded, mapping=mapping, basis=basis, missing=target.missing))
        _carry_add(carry, target.exact)
        _carry_add(booked_carry, previous)
        AccrualDay.objects.update_or_create(
            day=day, defaults={"fingerprint": fingerprint, "exact": {c: str(v) for c, v in target.exact.items()}}
        )
    return result


def _same_share(exact: dict[str, Decimal], carry: dict[str, Decimal], booked_carry: dict[str, Decimal]) -> bool:
    """Whether a day whose rows did not change still books the same amount: an earlier day's
    change moves the carry, which moves this day's cents only when its rounding crosses a unit."""
    return all(
        day_amount(carry=carry[c], exact=v, places=MINOR_UNITS[c])  # type: ignore[index]
        == day_amount(carry=booked_carry[c], exact=v, places=MINOR_UNITS[c])  # type: ignore[index]
        for c, v in exact.items()
    )


def _carry_add(carry: dict[str, Decimal], exact: dict[str, Decimal]) -> None:
    for currency, amount in exact.items():
        carry[currency] += amount


ACCRUE_KIND = "accrue"  # JobRun.kind of range accruals; key "force" for forced ones


def range_accrue(*, start: date, end: date, force: bool = False) -> list[MonthResult]:
    """Accrue every month touching [start, end) (whole months: the rounding carry runs from
    the first of the month), a month per transaction through the resumable runner
    (apps.common.dayrun): its JobRun spans [the first month, the month after the last) and its
    next_day is the first day of the next month to accrue, so after a crash the same call
    resumes there. Returns the results of the months this call accrued."""
    first = month_of(start)
    if end <= first:
        return []
    results: list[MonthResult] = []

    def work(month: date) -> None:
        results.append(month_accrue(month=month, force=force))

    key = "force" if force else ""
    stop = next_month(month_of(end - DAY))  # the month after the last one touching the range
    jobrun_run(kind=ACCRUE_KIND, key=key, start=first, end=stop, work=work, step=next_month)
    return results


@dataclass
class DirtyMonths(MarkConsumer[date, MonthResult]):
    """The months to book again: those of the marks up to the latest (a dirty day is a UTC date,
    or a date in the zone of when it was marked (books_zone_sync): a neighbour month may hold its
    hours, so the months of the day before and after are done too; their unchanged days are
    skipped by fingerprint), of the last LEDGER_RECENT_DAYS days before `today`, and every open
    month of the last LEDGER_OPEN_LOOKBACK_DAYS days. A month's days are booked a transaction each
    under the month's lock (day_post), so a month is not run in one; the marks read are cleared
    once every month is booked."""

    marks = DIRTY
    read = Read.LATEST
    clear = Clear.THROUGH
    atomic = False
    today: date

    def unit(self, mark: date) -> date:
        return month_of(mark)

    def extra(self, marks: list[date]) -> list[date]:
        recent = [self.today - timedelta(days=i) for i in range(conf.get("LEDGER_RECENT_DAYS") + 1)]
        around = [d + i * DAY for d in marks for i in (-1, 1)]
        lookback = month_of(self.today - timedelta(days=conf.get("LEDGER_OPEN_LOOKBACK_DAYS")))
        open_months = Period.objects.filter(status=Period.Status.OPEN, month__gte=lookback)
        return [*recent, *around, *open_months.values_list("month", flat=True)]

    def work(self, unit: date, values: list[date]) -> MonthResult:
        return month_accrue(month=unit)


def recent_accrue(*, now: datetime | None = None) -> list[MonthResult]:
    """What the beat job runs: the zone of open months brought in line first (books_zone_sync),
    then the months DirtyMonths names."""
    books_zone_sync()
    return DirtyMonths(today=day_of(now or timezone.now())).run().results


def books_zone_sync() -> list[date]:
    """Open months last accrued in another zone than the accounting zone now: mark them dirty
    and give them the new zone, so the next accrual books their days again in it. Closed
    months keep their zone and figures."""
    name = zone_name()
    accounting_zone()  # an unusable zone stops here, before anything changes
    grid_check()  # so does a zone whose hours are not those the rollups are kept in
    months = sorted(Period.objects.filter(status=Period.Status.OPEN).exclude(tz=name).values_list("month", flat=True))
    if months:
        with transaction.atomic():
            # The first and last day of each: the edge hours move to or from the months around it,
            # which recent_accrue then looks at too (even if they have no period yet).
            edges = [d for m in months for d in (m, next_month(m) - DAY)]
            days_mark_dirty(days=edges)
            Period.objects.filter(month__in=months, status=Period.Status.OPEN).update(tz=name)
    return months
