"""The headline figures, each defined once (docs/dashboards.md, "Figures"): every page that shows
what a window cost or how many tokens it processed reads them from here, for the same window,
business lines and currency.

**Spend** is the expense of the window's usage in the books' currency: what the ledger books for it. For
each accounting day of the window that the journal holds as its priced rows stand (booked and not marked
dirty since), the day's expense lines (accrual and adjusting entries alike); for the rest (a day not
booked yet, today's hours priced since the last accrual, the hours of a partial day at the window's
edges), the lines the accrual would book from the priced rows (`day_target`): a whole day rounded as the
accrual will round it (its share of the month's rounding carry, split over the lines), so the figure does
not move by a cent when the journal books it; the hours of a day the window cuts rounded once. Its parts:
the tokens' cost (`usage`, of which `unassigned`: tokens no business line claimed) and pool capacity no
token used (`idle`). A scoped reader's spend is that of their cost centres.

**Tokens** is every token classified in the window (the class rollups: effective, waste, cache and
shadow), of which `priced` the tokens that have a cost yet (a model without a price, or an hour not yet
priced, leaves tokens unpriced)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import F, Q, Sum

from apps.classification.models import HourlyClass
from apps.common.buckets import accounting_zone, day_end, day_of, day_start, month_of, zone_name
from apps.common.composed import SQL, table, text
from apps.common.replica import read_connection
from apps.currencies.models import MissingRate
from apps.currencies.rates import functional_currency, rates_between
from apps.ingest.models import DimSet, ServedModel
from apps.ledger import conf
from apps.ledger.mapping import Mapping, mapping_load
from apps.ledger.models import Account, AccrualDay, JournalLine
from apps.ledger.readings import day_readings, hours_where
from apps.ledger.rounding import round_half_up
from apps.ledger.services.accrual import DayTarget, LineKey, booked_days, day_target, target_round
from apps.pricing.models import MINOR_UNITS, HourlyCost

DAY = timedelta(days=1)
ZERO = Decimal(0)


@dataclass(frozen=True)
class Spend:
    """What a window cost in the books' currency, and its parts (usage + idle = total)."""

    currency: str
    usage: Decimal  # the tokens' cost, business lines' and unassigned
    unassigned: Decimal  # of usage: tokens no business line claimed
    idle: Decimal  # pool capacity no token used, booked to a cost centre of the idle policy
    # Of the total: priced since the journal last booked those days; the next accrual books it.
    pending: Decimal
    # Priced in a currency the day has no exchange rate for: not in the total (currency -> amount as priced).
    unconverted: dict[str, Decimal] = field(default_factory=dict)

    @property
    def total(self) -> Decimal:
        return self.usage + self.idle

    @property
    def idle_share(self) -> float | None:
        """Idle capacity as a fraction of the total (None without spend)."""
        return float(self.idle / self.total) if self.total else None


@dataclass(frozen=True)
class Tokens:
    total: int  # every token classified in the window
    priced: int  # of them, the tokens with a cost


def _round(amount: Decimal, currency: str) -> Decimal:
    """To the currency's minor unit as the journal rounds (apps/ledger/rounding.py)."""
    return round_half_up(amount, MINOR_UNITS.get(currency, 2))  # type: ignore[call-overload]


def _whole_days(start: datetime, end: datetime) -> tuple[list[date], list[tuple[date, datetime, datetime]]]:
    """The accounting days wholly inside [start, end), and the (day, from, to) of the partial ones."""
    whole: list[date] = []
    partial: list[tuple[date, datetime, datetime]] = []
    day = day_of(start)
    while day_start(day) < end:
        lo, hi = max(day_start(day), start), min(day_end(day), end)
        if lo == day_start(day) and hi == day_end(day):
            whole.append(day)
        elif lo < hi:
            partial.append((day, lo, hi))
        day += DAY
    return whole, partial


def spend(*, start: datetime, end: datetime, lines: list[str] | None = None, model: str | None = None) -> Spend:
    """Spend of [start, end) (module docstring), for the cost centres `lines` (None: every one) and
    one model's tokens (`model`: no idle then, idle belongs to no model)."""
    currency = functional_currency()
    unassigned_cc = conf.get("LEDGER_UNASSIGNED")
    whole, partial = _whole_days(start, end)
    booked_all = booked_days(sorted({*whole, *(p[0] for p in partial)}))
    booked = [d for d in whole if d in booked_all]
    usage = unassigned = idle = ZERO
    unconverted: dict[str, Decimal] = defaultdict(Decimal)
    # The journal's days.
    if booked:
        found = JournalLine.objects.filter(day__in=booked, currency=currency, account__kind=Account.Kind.EXPENSE)
        if lines is not None:
            found = found.filter(cost_centre__in=lines)
        if model is not None:
            found = found.filter(model__name=model)
        sums = found.aggregate(
            usage=Sum(F("debit") - F("credit"), filter=Q(pool__isnull=True) | Q(model__isnull=False)),
            unassigned=Sum(F("debit") - F("credit"), filter=Q(model__isnull=False, cost_centre=unassigned_cc)),
            idle=Sum(F("debit") - F("credit"), filter=Q(pool__isnull=False, model__isnull=True)),
        )
        usage, unassigned, idle = (sums[k] or ZERO for k in ("usage", "unassigned", "idle"))
        if lines is None and model is None:  # noted per day and currency, not per line
            missed = MissingRate.objects.filter(day__in=booked, to=currency)
            for row in missed.values("currency").annotate(cost=Sum("amount")):
                unconverted[row["currency"]] += row["cost"]
    # The rest, as the accrual would book it (what it booked, for the hours of a booked day the window cuts):
    # whole days rounded as the accrual rounds them, the hours of a day the window cuts rounded once.
    model_id = ServedModel.objects.filter(name=model).values_list("id", flat=True).first() if model else None
    by_model = ModelFilter(asked=model is not None, id=model_id)
    mapping = mapping_load()
    whole_rest = [d for d in whole if d not in booked_all]
    rounded, exact = _Parts(), _Parts()
    for target, carry in _day_targets(whole_rest, mapping):
        for missing, (cost, _tokens) in target.missing.items():
            unconverted[missing] += cost
        parts = target_round(target=target, carry=carry).get(currency, {})
        rounded.add({key: part.amount for key, part in parts.items()}, lines, by_model, pending=True)
    for day, lo, hi in partial:
        target = day_target(day=day, mapping=mapping, bounds=(lo, hi))
        for missing, (cost, _tokens) in target.missing.items():
            unconverted[missing] += cost
        amounts = {key: acc.exact for key, acc in target.lines.get(currency, {}).items()}
        exact.add(amounts, lines, by_model, pending=day not in booked_all)
    return Spend(
        currency=currency,
        usage=usage + rounded.usage + _round(exact.usage, currency),
        unassigned=unassigned + rounded.unassigned + _round(exact.unassigned, currency),
        idle=idle + rounded.idle + _round(exact.idle, currency),
        pending=rounded.pending + _round(exact.pending, currency),
        unconverted={c: v for c, v in unconverted.items() if v},
    )


@dataclass(frozen=True)
class ModelFilter:
    """The spend of one model (`asked`, its id None when the platform does not know the name), or of all."""

    asked: bool
    id: int | None


@dataclass
class _Parts:
    """Sums of a spend's parts over lines of the accrual's days (LineKey -> amount)."""

    usage: Decimal = ZERO
    unassigned: Decimal = ZERO
    idle: Decimal = ZERO
    pending: Decimal = ZERO

    def add(
        self, amounts: dict[LineKey, Decimal], lines: list[str] | None, model: ModelFilter, *, pending: bool
    ) -> None:
        """Add the lines of `lines` (all when None) and of the model (all when not asked for; none
        when asked for one the platform does not know: its id is then None)."""
        unassigned_cc = conf.get("LEDGER_UNASSIGNED")
        for key, amount in amounts.items():
            if lines is not None and key.cost_centre not in lines:
                continue
            if model.asked and key.model_id != model.id:
                continue
            if key.model_id is None and key.pool_id is not None:  # idle, whichever cost centre the policy books
                self.idle += amount
            else:
                self.usage += amount
                self.unassigned += amount if key.cost_centre == unassigned_cc else ZERO
            self.pending += amount if pending else ZERO


def _day_targets(days: list[date], mapping: Mapping) -> Iterator[tuple[DayTarget, dict[str, Decimal]]]:
    """Each of `days` (ascending, none of them booked as its rows stand) with its target and the
    month's rounding carry before it, as the accrual would book it: the exact totals of the month's
    earlier days, those it last booked (AccrualDay) and those of `days` from their targets."""
    if not days:
        return
    rows = AccrualDay.objects.filter(day__gte=month_of(days[0]), day__lt=days[-1]).values_list("day", "exact")
    exacts = {day: {c: Decimal(v) for c, v in exact.items()} for day, exact in rows if day not in days}
    rates = rates_between(start=days[0], end=days[-1] + DAY)  # one read for the days, not one a day
    for day in days:
        target = day_target(day=day, mapping=mapping, bounds=(day_start(day), day_end(day)), rates=rates.get(day, {}))
        carry: dict[str, Decimal] = defaultdict(Decimal)
        for earlier, exact in exacts.items():
            if earlier < day and month_of(earlier) == month_of(day):
                for currency, amount in exact.items():
                    carry[currency] += amount
        exacts[day] = target.exact
        yield target, carry


def tokens(*, start: datetime, end: datetime, lines: list[str] | None = None) -> Tokens:
    """Tokens of [start, end) (module docstring) for the business lines `lines` (None: every one;
    the unassigned cost centre stands for tokens without a line). Whole accounting days are read
    through their kept readings (apps/ledger/readings.py: a month is 3.8 million rows of each
    rollup at 10 million records), the hours of a partial day from the rows."""
    unassigned_cc = conf.get("LEDGER_UNASSIGNED")
    whole, partial = _whole_days(start, end)
    days = list(day_readings("tokens", whole, accounting_zone(), _tokens_by_day, []).values())
    if partial:
        days += _tokens_by_day([(lo, hi) for _day, lo, hi in partial]).values()
    total = priced = 0
    for rows in days:
        for line, line_total, line_priced in rows:
            if lines is None or (line or unassigned_cc) in lines:
                total, priced = total + line_total, priced + line_priced
    return Tokens(total, priced)


def _tokens_by_day(hours: list[tuple[datetime, datetime]]) -> dict[date, list[list]]:
    """Per accounting day of the `hours`: [business line, classified tokens, priced tokens] per
    line of the dim sets (as stored: empty for none)."""
    where, params = hours_where(SQL("c.hour"), hours)
    found: dict[date, dict[str, list[int]]] = defaultdict(dict)
    with read_connection().cursor() as cursor:
        for i, rollup in enumerate((HourlyClass, HourlyCost)):
            statement = SQL(
                "SELECT d.business_line, (c.hour AT TIME ZONE %s)::date, SUM(c.tokens)::bigint FROM {rollup} c "
                "JOIN {dims} d ON d.id = c.dims_id WHERE {where} GROUP BY 1, 2"
            ).format(rollup=table(rollup), dims=table(DimSet), where=where)
            cursor.execute(text(statement), [zone_name(), *params])
            for line, day, count in cursor.fetchall():
                found[day].setdefault(line, [line, 0, 0])[1 + i] += int(count)
    return {day: list(lines.values()) for day, lines in found.items()}
