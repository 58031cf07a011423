"""Idle capacity shared out by the policy in force (docs/ledger.md, "Idle capacity").

Pricing leaves, for every ended pool-hour, the part of its cost no token used (PoolIdleHour.idle,
a whole number of the currency's smallest unit). Here each such hour is shared out by the policy
of its month (IdlePolicy):

- showback: it all stays a platform cost, booked to LEDGER_IDLE_COST_CENTRE;
- by use: to the cost centres whose tokens used the pool in that hour, in proportion to their
  compute-weighted tokens (the pool's weights, as pricing allocates its cost); an hour nobody
  used stays a platform cost;
- by reserved share: to the lines with a reserved share of the pool (ReservedShare), each its
  percentage; what the shares leave of 100 % stays a platform cost.

Each hour is split to the smallest unit by largest remainder (apps.pricing.book.idle_split), so
the parts of an hour add up to its idle exactly and any window's parts are the sum of its hours'.
`idle_parts` is the one computation: the accrual books its sums per day (services/accrual.py) and
`apps.ledger.selectors.idle_by_line` reads it for any window.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.utils.translation import gettext

from apps.common.composed import SQL, table, text
from apps.ingest.models import DimSet
from apps.ledger import conf
from apps.ledger.idle.models import IdlePolicy, ReservedShare, reserved_in_force
from apps.pricing.book import PoolTerms, idle_split
from apps.pricing.models import MINOR_UNITS, CostPool, HourlyCost, PoolIdleHour
from apps.pricing.selectors import pool_terms

SHOWBACK = str(IdlePolicy.Policy.SHOWBACK)
BY_USE = str(IdlePolicy.Policy.BY_USE)
RESERVED = str(IdlePolicy.Policy.RESERVED)
HUNDRED = Decimal(100)


def policies_in_force(months: Iterable[date]) -> dict[date, str]:
    """The idle policy of each month: the latest setting from that month or before, else showback."""
    settings = list(IdlePolicy.objects.order_by("month").values_list("month", "policy"))
    found = {}
    for month in months:
        found[month] = next((p for m, p in reversed(settings) if m <= month), SHOWBACK)
    return found


def policy_in_force(month: date) -> str:
    return policies_in_force([month])[month]


def policy_label(policy: str) -> str:
    """A policy as the pages and the month pack name it (translated)."""
    labels = {
        SHOWBACK: gettext("showback: a platform cost"),
        BY_USE: gettext("by use: the lines that used the pool in the hour"),
        RESERVED: gettext("by reserved share of the pool"),
    }
    return labels[policy]


@dataclass(frozen=True)
class IdlePart:
    """A cost centre's part of one pool-hour's idle cost."""

    hour: datetime
    pool_id: int
    currency: str
    cost_centre: str
    amount: Decimal  # whole smallest units of `currency`
    allocated: bool  # given to the cost centre by the policy; False: kept as a platform cost


_HOURS_SQL = text(
    SQL(
        """
SELECT pool_id, hour, currency, idle FROM {idle}
WHERE hour >= %s AND hour < %s AND idle > 0 ORDER BY hour, pool_id
"""
    ).format(idle=table(PoolIdleHour))
)
# Each cost centre's tokens of each pool-hour, per component (weighted in Python by the pool's weights).
_USE_SQL = text(
    SQL(
        """
SELECT c.pool_id, c.hour, COALESCE(NULLIF(d.business_line, ''), %s), c.component, SUM(c.tokens)
FROM {costs} c JOIN {dims} d ON d.id = c.dims_id
WHERE c.hour >= %s AND c.hour < %s AND c.pool_id IS NOT NULL
GROUP BY 1, 2, 3, 4 HAVING SUM(c.tokens) > 0
"""
    ).format(costs=table(HourlyCost), dims=table(DimSet))
)


def idle_parts(*, start: datetime, end: datetime, month: date, cursor: Any = None) -> list[IdlePart]:
    """The idle cost of the ended pool-hours in [start, end), shared out by `month`'s policy (the
    window lies in that month's books; the accrual and idle_by_line give one month at a time)."""
    policy = policy_in_force(month)
    if cursor is None:
        with connection.cursor() as own:
            return idle_parts(start=start, end=end, month=month, cursor=own)
    cursor.execute(_HOURS_SQL, [start, end])
    hours = cursor.fetchall()
    platform = conf.get("LEDGER_IDLE_COST_CENTRE")
    if policy == BY_USE:
        use = _use(cursor, start, end)
        return [p for pool, hour, cur, idle in hours for p in _split(pool, hour, cur, idle, use[(pool, hour)], None)]
    if policy == RESERVED:
        shares = _reserved(month)
        return [p for pool, hour, cur, idle in hours for p in _split(pool, hour, cur, idle, shares[pool], HUNDRED)]
    return [IdlePart(hour, pool, cur, platform, idle, False) for pool, hour, cur, idle in hours]


def _split(
    pool_id: int, hour: datetime, currency: str, idle: Decimal, weights: dict[str, Decimal], whole: Decimal | None
) -> list[IdlePart]:
    places = MINOR_UNITS[currency]  # type: ignore[index]
    parts, platform = idle_split(idle=idle, weights=weights, places=places, whole=whole)
    found = [IdlePart(hour, pool_id, currency, cc, amount, True) for cc, amount in parts.items() if amount]
    if platform:
        found.append(IdlePart(hour, pool_id, currency, conf.get("LEDGER_IDLE_COST_CENTRE"), platform, False))
    return found


def _use(cursor: Any, start: datetime, end: datetime) -> dict[tuple[int, datetime], dict[str, Decimal]]:
    """Per pool-hour, each cost centre's compute-weighted tokens."""
    cursor.execute(_USE_SQL, [conf.get("LEDGER_UNASSIGNED"), start, end])
    rows = cursor.fetchall()
    terms: dict[int, PoolTerms] = {
        p.pk: pool_terms(pool=p) for p in CostPool.objects.filter(pk__in={r[0] for r in rows})
    }
    use: dict[tuple[int, datetime], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for pool_id, hour, cc, component, tokens in rows:
        use[(pool_id, hour)][cc] += int(tokens) * terms[pool_id].weight(component)
    return use


def _reserved(month: date) -> dict[int, dict[str, Decimal]]:
    """Per pool, each line's reserved share (percent) in force in `month`."""
    by_pool: dict[int, list[ReservedShare]] = defaultdict(list)
    for row in ReservedShare.objects.filter(month__lte=month):
        by_pool[row.pool_id].append(row)
    shares: dict[int, dict[str, Decimal]] = defaultdict(dict)
    shares.update((pool, reserved_in_force(rows, month)) for pool, rows in by_pool.items())
    return shares


@dataclass
class IdleLine:
    """A window's idle of one pool for one cost centre: what the policy gave it and what it
    keeps as the platform's (the platform's cost centre may also use pools), and in how many
    pool-hours it got a part."""

    currency: str
    pool_id: int
    cost_centre: str
    allocated: Decimal = Decimal(0)
    platform: Decimal = Decimal(0)
    hours: int = 0

    @property
    def amount(self) -> Decimal:
        return self.allocated + self.platform


def idle_lines(parts: Iterable[IdlePart]) -> list[IdleLine]:
    """The parts summed per (currency, pool, cost centre), in that order."""
    lines: dict[tuple[str, int, str], IdleLine] = {}
    hours: dict[tuple[str, int, str], set[datetime]] = defaultdict(set)
    for part in parts:
        key = (part.currency, part.pool_id, part.cost_centre)
        line = lines.setdefault(key, IdleLine(*key))
        if part.allocated:
            line.allocated += part.amount
        else:
            line.platform += part.amount
        hours[key].add(part.hour)
    for key, line in lines.items():
        line.hours = len(hours[key])
    return [lines[k] for k in sorted(lines)]
