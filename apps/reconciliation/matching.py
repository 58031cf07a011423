"""A supplier's month matched against the platform, by accounting day and model (and key or
project where the supplier's mapping has one), read live so a re-import, a re-price or a posted
adjustment shows at once.

The platform side of a hosted supplier is the priced cost rollup (HourlyCost priced by a price
version in the supplier's currency) of the models its patterns name; of a GPU pool supplier, its
pool's hourly cost (PoolIdleHour: allocated plus idle) with the tokens the pool served. Days are
the month window's (apps/ledger/services/accrual.month_window: the accounting zone, or the zone
a closed month was closed in).

Each (day, model, key) is one of:
- bill_only: on the bill, nothing on the platform;
- platform_only: on the platform beyond the absolute tolerances, not on the bill;
- amount: both, amounts differ beyond both tolerances (absolute and relative to the bill);
- tokens: both, the token total of the columns the bill has differs beyond both tolerances.
A key can have an amount and a token difference. Posted bill adjustments of the key count on the
platform side: a difference they cover (within the tolerances) is `explained`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fnmatch import fnmatchcase

from apps.classification.engine import CACHE_WRITE, CACHED, OUTPUT, REASONING, STRUCTURAL, UNCACHED
from apps.common.buckets import month_days, month_of
from apps.common.composed import SQL, table, text
from apps.ingest.models import DimSet, ServedModel
from apps.ledger import conf
from apps.ledger.rounding import round_half_up
from apps.ledger.services.accrual import analytic_cursor, month_window
from apps.pricing.models import MINOR_UNITS, HourlyCost, PoolIdleHour
from apps.reconciliation.models import Bill, BillAdjustment, Supplier

KINDS = ("bill_only", "platform_only", "amount", "tokens")
Key = tuple[date, str, str]  # (day, model, key)


@dataclass
class Side:
    amount: Decimal = Decimal(0)
    input_tokens: int = 0
    output_tokens: int = 0
    lines: set[str] = field(default_factory=set)  # business lines (platform side)
    present: bool = False
    has_input: bool = False  # bill side: the bill has the column
    has_output: bool = False

    def tokens(self, has_input: bool, has_output: bool) -> int:
        return (self.input_tokens if has_input else 0) + (self.output_tokens if has_output else 0)


@dataclass
class Difference:
    supplier: str
    currency: str
    day: date
    model: str
    key: str
    business_line: str
    kind: str
    bill_amount: Decimal
    platform_amount: Decimal
    bill_tokens: int | None
    platform_tokens: int | None
    adjusted_amount: Decimal = Decimal(0)
    adjusted_tokens: int = 0
    explained: bool = False

    @property
    def amount_diff(self) -> Decimal:
        return self.bill_amount - self.platform_amount

    @property
    def tokens_diff(self) -> int | None:
        if self.bill_tokens is None or self.platform_tokens is None:
            return None
        return self.bill_tokens - self.platform_tokens

    @property
    def residual(self) -> Decimal:
        """What no posted adjustment explains (0 for a token difference)."""
        return Decimal(0) if self.kind == "tokens" or self.explained else self.amount_diff - self.adjusted_amount


@dataclass
class Reconciliation:
    supplier: Supplier
    month: date
    bill: Bill | None
    bill_total: Decimal
    platform_total: Decimal
    differences: list[Difference]

    @property
    def open(self) -> list[Difference]:
        return [d for d in self.differences if not d.explained]

    @property
    def unreconciled(self) -> Decimal:
        """Money no adjustment explains: each key's unexplained amount difference, in absolute value."""
        return sum((abs(d.residual) for d in self.open), Decimal(0))

    @property
    def reconciled(self) -> bool:
        return self.bill is not None and not self.open


def _beyond(diff: Decimal, reference: Decimal, absolute: Decimal, relative: Decimal) -> bool:
    return abs(diff) > absolute and abs(diff) > relative * abs(reference)


# --- the two sides -------------------------------------------------------------------------------


def bill_side(bill: Bill | None) -> dict[Key, Side]:
    sides: dict[Key, Side] = defaultdict(Side)
    if bill is None:
        return sides
    for line in bill.lines.all():
        side = sides[(line.day, line.model, line.key)]
        side.present = True
        side.amount += line.amount
        side.has_input |= line.input_tokens is not None
        side.has_output |= line.output_tokens is not None
        side.input_tokens += line.input_tokens or 0
        side.output_tokens += line.output_tokens or 0
    return sides


# {key}: the bill's key of a row, the value of the supplier's key dim ('' without one).
_HOSTED_SQL = SQL(
    """
SELECT LEAST(GREATEST((c.hour AT TIME ZONE %s)::date, %s), %s), m.name, {key}, d.business_line,
       COALESCE(SUM(c.tokens) FILTER (WHERE c.component IN (%s, %s, %s)), 0),
       COALESCE(SUM(c.tokens) FILTER (WHERE c.component IN (%s, %s, %s)), 0),
       SUM(c.cost)
FROM {costs} c
JOIN {models} m ON m.id = c.model_id
JOIN {dims} d ON d.id = c.dims_id
WHERE c.hour >= %s AND c.hour < %s AND c.price_version_id IS NOT NULL AND c.currency = %s
GROUP BY 1, 2, 3, 4
"""
)
_KEY_DIM, _NO_KEY = SQL("COALESCE(d.dims->>%s, '')"), SQL("''")

_POOL_COST_SQL = text(
    SQL(
        """
SELECT LEAST(GREATEST((hour AT TIME ZONE %s)::date, %s), %s), SUM(pool_cost) FROM {idle}
WHERE pool_id = %s AND hour >= %s AND hour < %s GROUP BY 1
"""
    ).format(idle=table(PoolIdleHour))
)

_POOL_TOKENS_SQL = text(
    SQL(
        """
SELECT LEAST(GREATEST((c.hour AT TIME ZONE %s)::date, %s), %s), d.business_line,
       COALESCE(SUM(c.tokens) FILTER (WHERE c.component IN (%s, %s, %s)), 0),
       COALESCE(SUM(c.tokens) FILTER (WHERE c.component IN (%s, %s, %s)), 0)
FROM {costs} c JOIN {dims} d ON d.id = c.dims_id
WHERE c.pool_id = %s AND c.hour >= %s AND c.hour < %s GROUP BY 1, 2
"""
    ).format(costs=table(HourlyCost), dims=table(DimSet))
)

# Input (cached, uncached, cache writes) and output as a bill counts them: reasoning is billed as output.
_COMPONENTS = [CACHED, UNCACHED, CACHE_WRITE, STRUCTURAL, OUTPUT, REASONING]


def platform_side(supplier: Supplier, month: date) -> dict[Key, Side]:
    window = month_window(month)
    days = month_days(month)
    head = [window.zone.key, days[0], days[-1]]
    if supplier.kind == Supplier.Kind.POOL:
        return _pool_side(supplier, head, window.start, window.end)
    return _hosted_side(supplier, head, window.start, window.end)


def _hosted_side(supplier: Supplier, head: list[object], start: object, end: object) -> dict[Key, Side]:
    keyed = bool(supplier.key_dim and supplier.col_key)
    params = [*head, *([supplier.key_dim] if keyed else []), *_COMPONENTS, start, end, supplier.currency]
    statement = _HOSTED_SQL.format(
        key=_KEY_DIM if keyed else _NO_KEY, costs=table(HourlyCost), models=table(ServedModel), dims=table(DimSet)
    )
    with analytic_cursor() as cursor:
        cursor.execute(text(statement), params)
        rows = cursor.fetchall()
    sides: dict[Key, Side] = defaultdict(Side)
    for day, model, key, line, inputs, outputs, cost in rows:
        if not any(fnmatchcase(model, pattern) for pattern in supplier.model_patterns):
            continue
        side = sides[(day, model, key)]
        side.present = True
        side.amount += cost
        side.input_tokens += int(inputs)
        side.output_tokens += int(outputs)
        side.lines.add(line)
    return sides


def _pool_side(supplier: Supplier, head: list[object], start: object, end: object) -> dict[Key, Side]:
    assert supplier.pool is not None
    name = supplier.pool.name
    with analytic_cursor() as cursor:
        cursor.execute(_POOL_COST_SQL, [*head, supplier.pool_id, start, end])
        costs = cursor.fetchall()
        cursor.execute(_POOL_TOKENS_SQL, [*head, *_COMPONENTS, supplier.pool_id, start, end])
        tokens = cursor.fetchall()
    sides: dict[Key, Side] = defaultdict(Side)
    for day, cost in costs:
        side = sides[(day, name, "")]
        side.present, side.amount = True, side.amount + cost
    for day, line, inputs, outputs in tokens:
        side = sides[(day, name, "")]
        side.present = True
        side.input_tokens += int(inputs)
        side.output_tokens += int(outputs)
        side.lines.add(line)
    return sides


def posted_adjustments(supplier: Supplier, month: date) -> dict[Key, tuple[Decimal, int]]:
    """Per key, what the supplier-month's posted adjustments add (amount, tokens)."""
    added: dict[Key, tuple[Decimal, int]] = defaultdict(lambda: (Decimal(0), 0))
    for adjustment in BillAdjustment.objects.filter(supplier=supplier, month=month, state=BillAdjustment.State.POSTED):
        for line in adjustment.lines:
            key = (date.fromisoformat(line["day"]), line["model"], line["key"])
            amount, tokens = added[key]
            added[key] = (amount + Decimal(line["amount"]), tokens + int(line["tokens"]))
    return added


# --- matching -----------------------------------------------------------------------------------


def supplier_reconcile(*, supplier: Supplier, month: date) -> Reconciliation:
    """The supplier's month: its accepted bill against the platform (see the module docstring)."""
    month = month_of(month)
    bill = Bill.objects.filter(supplier=supplier, month=month, state=Bill.State.ACCEPTED).first()
    billed, platform = bill_side(bill), platform_side(supplier, month)
    places = MINOR_UNITS.get(supplier.currency, 2)  # type: ignore[call-overload]
    for side in (*billed.values(), *platform.values()):  # both to the minor unit, per key
        side.amount = round_half_up(side.amount, places)
    adjusted = posted_adjustments(supplier, month)
    has_input = any(s.has_input for s in billed.values()) or bool(supplier.col_input_tokens)
    has_output = any(s.has_output for s in billed.values()) or bool(supplier.col_output_tokens)
    differences: list[Difference] = []
    for key in sorted(set(billed) | set(platform)):
        found = _differences(supplier, key, billed.get(key, Side()), platform.get(key, Side()), has_input, has_output)
        _explain(supplier, found, adjusted.get(key))
        differences += found
    return Reconciliation(
        supplier=supplier,
        month=month,
        bill=bill,
        bill_total=sum((s.amount for s in billed.values()), Decimal(0)),
        platform_total=sum((s.amount for s in platform.values()), Decimal(0)),
        differences=differences,
    )


def _business_line(supplier: Supplier, platform: Side) -> str:
    if len(platform.lines) == 1:
        return next(iter(platform.lines)) or conf.get("LEDGER_UNASSIGNED")
    return supplier.cost_centre or conf.get("LEDGER_UNASSIGNED")


def _differences(
    supplier: Supplier, key: Key, bill: Side, platform: Side, has_input: bool, has_output: bool
) -> list[Difference]:
    counts_tokens = has_input or has_output
    bill_tokens = bill.tokens(has_input, has_output) if counts_tokens else None
    platform_tokens = platform.tokens(has_input, has_output) if counts_tokens else None

    def make(kind: str) -> Difference:
        return Difference(
            supplier=supplier.name,
            currency=supplier.currency,
            day=key[0],
            model=key[1],
            key=key[2],
            business_line=_business_line(supplier, platform),
            kind=kind,
            bill_amount=bill.amount,
            platform_amount=platform.amount,
            bill_tokens=bill_tokens,
            platform_tokens=platform_tokens,
        )

    if bill.present and not platform.present:
        return [make("bill_only")]
    if platform.present and not bill.present:
        tokens_off = (platform_tokens or 0) > supplier.tokens_abs
        return [make("platform_only")] if abs(platform.amount) > supplier.amount_abs or tokens_off else []
    found = []
    if _beyond(bill.amount - platform.amount, bill.amount, supplier.amount_abs, supplier.amount_rel):
        found.append(make("amount"))
    if bill_tokens is not None and platform_tokens is not None:
        diff = Decimal(bill_tokens - platform_tokens)
        if _beyond(diff, Decimal(bill_tokens), Decimal(supplier.tokens_abs), supplier.tokens_rel):
            found.append(make("tokens"))
    return found


def _explain(supplier: Supplier, found: list[Difference], added: tuple[Decimal, int] | None) -> None:
    """Mark the differences the posted adjustments of their key cover."""
    if added is None:
        return
    amount, tokens = added
    for diff in found:
        diff.adjusted_amount, diff.adjusted_tokens = amount, tokens
        money_left = diff.amount_diff - amount
        money_ok = not _beyond(money_left, diff.bill_amount, supplier.amount_abs, supplier.amount_rel)
        tokens_left = (diff.tokens_diff or 0) - tokens
        tokens_ok = diff.tokens_diff is None or not _beyond(
            Decimal(tokens_left), Decimal(diff.bill_tokens or 0), Decimal(supplier.tokens_abs), supplier.tokens_rel
        )
        diff.explained = {"amount": money_ok, "tokens": tokens_ok}.get(diff.kind, money_ok and tokens_ok)


def month_reconcile(*, month: date, suppliers: list[Supplier] | None = None) -> list[Reconciliation]:
    """Every active supplier's month."""
    chosen = suppliers if suppliers is not None else list(Supplier.objects.filter(active=True).select_related("pool"))
    return [supplier_reconcile(supplier=s, month=month) for s in chosen]
