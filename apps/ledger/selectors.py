"""Reads of the ledger: trial balance, the account x cost centre x month matrix, journal lines
and the usage behind them, budget vs actual, period status, findings."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, F, Max, Q, QuerySet, Sum

from apps.accounts.models import CollectorKey
from apps.classification.models import HourlyClass
from apps.common.buckets import day_of, month_days, month_of, next_month
from apps.common.composed import SQL, table, text
from apps.common.replica import read_connection
from apps.currencies.rates import functional_currency, rates_between
from apps.ledger import conf
from apps.ledger.idle.allocation import SHOWBACK, IdlePart, idle_parts, policy_in_force
from apps.ledger.mapping import mapping_load
from apps.ledger.models import Account, AccrualDay, JournalLine, Period
from apps.ledger.services.accrual import PRICED_HOURS_FROM, MonthWindow, month_window

ZERO = Decimal(0)


def _months_between(start: date, end: date) -> list[date]:
    """The months from `start`'s to `end`'s, both included."""
    months, month = [], month_of(start)
    while month <= month_of(end):
        months.append(month)
        month = next_month(month)
    return months


def _originals(lines: QuerySet[JournalLine]) -> dict[tuple[str, str], dict[str, Decimal]]:
    """Per (currency, account code): the net of its lines converted from another currency, as
    priced in that currency (debit positive)."""
    rows = (
        lines.filter(original_currency__isnull=False)
        .values("currency", "account__code", "original_currency")
        .annotate(net=Sum("original_amount"))
        .order_by("original_currency")
    )
    found: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(dict)
    for row in rows:
        found[(row["currency"], row["account__code"])][row["original_currency"]] = row["net"]
    return found


def trial_balance(*, month: date, business_lines: list[str] | None = None) -> dict[str, Any]:
    """Per currency (the functional one, and any a supplier bill was posted in), each account's
    debits and credits posted in the month, and the totals (equal: every entry balances); each
    account's `originals` holds, per currency it was priced in, the net of its converted lines
    as priced. With `business_lines`, only those cost centres' lines: they
    balance too, as accrual credits the payable per cost centre."""
    lines = JournalLine.objects.filter(period_id=month_of(month))
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    rows = (
        lines.values("currency", "account__code", "account__name", "account__kind")
        .annotate(debits=Sum("debit"), credits=Sum("credit"))
        .order_by("currency", "account__code")
    )
    originals = _originals(lines)
    currencies: dict[str, dict[str, Any]] = {}
    for row in rows:
        book = currencies.setdefault(
            row["currency"], {"currency": row["currency"], "accounts": [], "debits": ZERO, "credits": ZERO}
        )
        book["accounts"].append(
            {
                "code": row["account__code"],
                "name": row["account__name"],
                "kind": row["account__kind"],
                "debits": row["debits"],
                "credits": row["credits"],
                "balance": row["debits"] - row["credits"],
                "originals": originals.get((row["currency"], row["account__code"]), {}),
            }
        )
        book["debits"] += row["debits"]
        book["credits"] += row["credits"]
    for book in currencies.values():
        book["balanced"] = book["debits"] == book["credits"]
    period = Period.objects.filter(month=month_of(month)).first()
    return {
        "period": f"{month:%Y-%m}",
        "status": period.status if period else Period.Status.OPEN,
        "currencies": list(currencies.values()),
    }


def ledger_matrix(
    *,
    start: date,
    end: date,
    kind: str | None = Account.Kind.EXPENSE,
    business_lines: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Net amount (debit - credit), debits, credits and tokens per month, account, cost centre
    and currency, for the months posted in [start's month, end's month]; only the cost centres
    (business lines) in `business_lines` unless it is None."""
    lines = JournalLine.objects.filter(period_id__gte=month_of(start), period_id__lte=month_of(end))
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    if kind:
        lines = lines.filter(account__kind=kind)
    rows = (
        lines.values("period_id", "account__code", "account__name", "cost_centre", "currency")
        .annotate(debits=Sum("debit"), credits=Sum("credit"), tokens=Sum("tokens"))
        .order_by("period_id", "account__code", "cost_centre", "currency")
    )
    return [
        {
            "month": f"{r['period_id']:%Y-%m}",
            "account": r["account__code"],
            "account_name": r["account__name"],
            "cost_centre": r["cost_centre"],
            "currency": r["currency"],
            "amount": r["debits"] - r["credits"],
            "debits": r["debits"],
            "credits": r["credits"],
            "tokens": r["tokens"],
        }
        for r in rows
    ]


@dataclass(frozen=True)
class LineFilter:
    month: date
    account: str | None = None
    cost_centre: str | None = None
    day: date | None = None
    model: str | None = None
    kind: str | None = None  # accrual / adjustment / bill
    entry: int | None = None  # one journal entry


def journal_lines(*, flt: LineFilter) -> QuerySet[JournalLine]:
    """Lines posted in a month, filtered, in entry order."""
    lines = JournalLine.objects.filter(period_id=month_of(flt.month)).select_related(
        "entry", "account", "model", "pool"
    )
    for value, lookup in (
        (flt.account, "account__code"),
        (flt.cost_centre, "cost_centre"),
        (flt.day, "day"),
        (flt.model, "model__name"),
        (flt.kind, "entry__kind"),
        (flt.entry, "entry_id"),
    ):
        if value:
            lines = lines.filter(**{lookup: value})
    return lines.order_by("entry__day", "entry_id", "id")


# {rule}: the mapping's rule of a row (Mapping.usage_sql).
_USAGE_SQL = SQL(
    """
SELECT * FROM (
    SELECT c.id, c.hour, k.name, d.dims, d.business_line, r.name, c.component, c.tokens, c.cost, c.currency,
           c.price_version_id, c.pool_id, {rule} AS rule_id, w.window_id,
           (SELECT array_agg(DISTINCT h.ruleset_id ORDER BY h.ruleset_id) FROM {classes} h
            WHERE h.hour = c.hour AND h.source_id = c.source_id AND h.model_id = c.model_id
              AND h.dims_id = c.dims_id AND h.reason_id = c.reason_id AND h.component = c.component) AS rulesets
{priced}    JOIN {keys} k ON k.id = c.source_id
    WHERE c.hour >= %s AND c.hour < %s AND c.currency = %s AND c.model_id = %s
      AND COALESCE(NULLIF(d.business_line, ''), %s) = %s
) usage ORDER BY hour, id
"""
)


def line_usage(*, line: JournalLine) -> dict[str, Any]:
    """The priced rows behind an expense line (pool-hours for an idle line), with the rule
    sets that classified them and the mapping rule that books them; `stale` when the mapping
    changed since the line was booked (the line then holds what the old rules gave)."""
    from apps.classification.engine import COMPONENTS

    if line.account.role == Account.Role.PAYABLE:
        return {"line": line.pk, "rows": [], "note": "the payable side: drill down from the expense lines"}
    start, end = month_window(month_of(line.day)).bounds(line.day)
    if line.model_id is None and line.pool_id is not None:
        policy = policy_in_force(month_of(line.day))
        stale = line.basis.get("idle_policy", SHOWBACK) != policy  # booked under another idle policy
        return {"line": line.pk, "rows": _idle_rows(line, start, end), "idle_policy": policy, "stale": stale}
    mapping = mapping_load()
    with read_connection().cursor() as cursor:
        cursor.execute(
            text(
                _USAGE_SQL.format(
                    rule=mapping.usage_sql,
                    classes=table(HourlyClass),
                    priced=PRICED_HOURS_FROM,
                    keys=table(CollectorKey),
                )
            ),
            [
                *mapping.usage_params,
                start,
                end,
                line.original_currency or line.currency,  # the rows as priced, before conversion
                line.model_id,
                conf.get("LEDGER_UNASSIGNED"),
                line.cost_centre,
            ],
        )
        found = cursor.fetchall()
    rows = []
    for (
        row_id,
        hour,
        source,
        dims,
        bl,
        reason,
        component,
        tokens,
        cost,
        currency,
        version,
        pool,
        rule,
        window,
        rulesets,
    ) in found:
        if mapping.account_of(rule) != line.account_id:
            continue
        rows.append(
            {
                "id": row_id,
                "hour": hour,
                "source": source,
                "dims": dims,
                "reason": reason,
                "component": COMPONENTS[component],
                "tokens": tokens,
                "cost": cost,
                "currency": currency,
                "price_version": version,
                "pool": pool,
                "mapping_rule": mapping.label_of(rule),
                "elastic_window": window,
                "rulesets": rulesets or [],
                "records": _records_url(hour, line, bl),
            }
        )
    labels = {r["mapping_rule"] for r in rows}
    return {"line": line.pk, "rows": rows, "stale": bool(labels - set(line.basis.get("rules", [])))}


def _records_url(hour: datetime, line: JournalLine, business_line: str) -> str:
    query = {"from": hour.isoformat(), "to": (hour + timedelta(hours=1)).isoformat(), "model": line.model.name}
    query["dims.business_line"] = business_line
    return f"/api/v1/records?{urlencode(query)}"


def _idle_rows(line: JournalLine, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """The pool-hours of an idle line, each with `share`: the part of its idle the policy in force
    gives the line's cost centre (as priced, before any conversion)."""
    from apps.pricing.models import PoolIdleHour

    hours = PoolIdleHour.objects.filter(pool_id=line.pool_id, hour__gte=start, hour__lt=end).order_by("hour")
    shares: dict[datetime, Decimal] = defaultdict(Decimal)
    for part in idle_parts(start=start, end=end, month=month_of(line.day)):
        if part.pool_id == line.pool_id and part.cost_centre == line.cost_centre:
            shares[part.hour] += part.amount
    return [
        {
            "hour": h.hour,
            "pool": h.pool_id,
            "pool_cost": h.pool_cost,
            "allocated": h.allocated,
            "idle": h.idle,
            "share": shares[h.hour],
            "utilisation": h.utilisation,
            "currency": h.currency,
        }
        for h in hours
    ]


def periods_status(*, months: int = 12) -> list[dict[str, Any]]:
    """The latest months with a period row: status, who closed it, how far accrual has booked."""
    periods = list(Period.objects.select_related("closed_by").order_by("-month")[:months])
    if not periods:
        return []
    states = AccrualDay.objects.filter(day__gte=periods[-1].month).exclude(fingerprint="").values("day").order_by()
    booked: dict[date, list[date]] = defaultdict(list)
    for state in states:
        booked[month_of(state["day"])].append(state["day"])
    last = AccrualDay.objects.filter(day__gte=periods[-1].month).aggregate(at=Max("booked_at"))["at"]
    return [
        {
            "month": p.label,
            "status": p.status,
            "closed_at": p.closed_at,
            "closed_by": p.closed_by.get_username() if p.closed_by else None,
            "days_booked": len(booked[p.month]),
            "booked_through": max(booked[p.month], default=None),
            "last_accrual_at": last,
            "adjustments_posted": p.adjustments,
        }
        for p in _with_adjustments(periods)
    ]


def _with_adjustments(periods: list[Period]) -> list[Any]:
    counts = dict(
        JournalLine.objects.filter(period_id__in=[p.month for p in periods], entry__kind="adjustment")
        .values_list("period_id")
        .annotate(n=Count("entry_id", distinct=True))
    )
    for period in periods:
        period.adjustments = counts.get(period.month, 0)  # type: ignore[attr-defined]
    return periods


def spend_trend(*, start: date, end: date, business_lines: list[str] | None = None) -> list[dict[str, Any]]:
    """Net expense per month and account (all cost centres, or those in `business_lines`), for
    the trend chart."""
    lines = JournalLine.objects.filter(
        Q(period_id__gte=month_of(start)) & Q(period_id__lte=month_of(end)), account__kind=Account.Kind.EXPENSE
    )
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    rows = (
        lines.values("period_id", "account__code", "currency")
        .annotate(net=Sum(F("debit") - F("credit")), tokens=Sum("tokens"))
        .order_by("period_id", "account__code", "currency")
    )
    return [
        {
            "month": f"{r['period_id']:%Y-%m}",
            "account": r["account__code"],
            "currency": r["currency"],
            "amount": r["net"],
            "tokens": r["tokens"],
        }
        for r in rows
    ]


# --- idle capacity by the policy in force --------------------------------------------------------


@dataclass(frozen=True)
class IdleByLine:
    """A window's idle capacity in the books' currency per cost centre, as the accrual books it:
    what the idle policy gave each line, and under the idle cost centre (LEDGER_IDLE_COST_CENTRE)
    what stays a platform cost. Exact: whole smallest units for pools priced in the books'
    currency, so a month's figures are its journal lines to the fen; a pool priced in another is
    converted at its day's rate, as the accrual does, and kept exact (the journal rounds a day's
    lines to the fen, the day's total unchanged)."""

    currency: str
    by_line: dict[str, Decimal]  # cost centre -> its idle (the platform's part included in its cost centre's)
    platform: Decimal  # of the total: kept as a platform cost
    policies: dict[str, str]  # month (YYYY-MM) -> the policy its hours were shared out by
    # Idle priced in a currency its day has no exchange rate for: not in the figures (currency -> amount).
    unconverted: dict[str, Decimal]

    @property
    def total(self) -> Decimal:
        return sum(self.by_line.values(), ZERO)

    @property
    def allocated(self) -> Decimal:
        """Of the total: given to business lines by the policy."""
        return self.total - self.platform


_EXACT = Decimal(1).scaleb(-12)


def idle_by_line(*, start: datetime, end: datetime, business_lines: list[str] | None = None) -> IdleByLine:
    """The idle capacity of the ended pool-hours in [start, end) by cost centre, shared out by the
    idle policy of each hour's month (apps/ledger/idle/allocation.py, the computation the accrual
    books), for the cost centres `business_lines` (None: every one). Any window: an hour, a day,
    a month; over a month's window (month_window) it equals the month's idle-account lines."""
    functional = functional_currency()
    by_line: dict[str, Decimal] = defaultdict(Decimal)
    unconverted: dict[str, Decimal] = defaultdict(Decimal)
    platform, policies = ZERO, {}
    for month in _months_between(day_of(start) - timedelta(days=1), day_of(end) + timedelta(days=1)):
        window = month_window(month)
        lo, hi = max(start, window.start), min(end, window.end)
        if lo >= hi:
            continue
        policies[f"{month:%Y-%m}"] = policy_in_force(month)
        days = month_days(month)
        rates = rates_between(start=days[0], end=days[-1] + timedelta(days=1))
        for (day, currency, cc), (amount, kept) in _idle_by_day(idle_parts(start=lo, end=hi, month=month), window):
            if business_lines is not None and cc not in business_lines:
                continue
            if currency == functional:
                by_line[cc] += amount
                platform += kept
            elif (rate := rates.get(day, {}).get(currency)) is not None:  # at the day's rate, as the accrual
                by_line[cc] += (amount * rate.rate).quantize(_EXACT)
                platform += (kept * rate.rate).quantize(_EXACT)
            else:
                unconverted[currency] += amount
    return IdleByLine(functional, dict(by_line), platform, policies, {c: v for c, v in unconverted.items() if v})


_IdleSums = list[tuple[tuple[date, str, str], tuple[Decimal, Decimal]]]


def _idle_by_day(parts: list[IdlePart], window: MonthWindow) -> _IdleSums:
    """Parts summed per (accounting day, currency, cost centre): (amount, of it the platform's)."""
    days = month_days(window.month)
    sums: dict[tuple[date, str, str], list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    for part in parts:
        day = min(max(part.hour.astimezone(window.zone).date(), days[0]), days[-1])
        found = sums[(day, part.currency, part.cost_centre)]
        found[0] += part.amount
        found[1] += ZERO if part.allocated else part.amount
    return [(k, (v[0], v[1])) for k, v in sorted(sums.items())]
