"""Waste in the books, reconciled to the /waste/ page.

The ledger side is what accrual books from: the priced rows of waste reasons in the month's
window (accounting days; a closed month keeps its own edges), on the days accrued so far, each
row's account decided by the mapping rules as accrual decides it. Most of it lands on the
waste account (taken from the journal, so it is what was booked, to the cent); a row inside an
elastic window lands on the elastic account, and is still waste here.

The /waste/ side is what that page shows for the same days and line, read where the page's
figures come from: tokens from the class rollup (unpriced tokens included), money from the cost
rollup. (The page's daily rollups are these hourly rows summed, and serve only days whose hours
have not changed since; the ledger, upstream of the pages, reads the hourly rows itself.) Where the two
differ, the parts are named: unpriced tokens, priced waste on days not accrued yet (or priced
after the day was accrued), rounding to cents in the journal, and rollups not rebuilt yet.

Both sides are read per accounting day, and a day the journal holds as its rows stand is kept
(apps/ledger/readings.py) under a key that any change to its priced, unpriced or classified rows
moves: at 10 million records a month the month's waste is 1.3 million priced rows, read once a
day changes, not at every view of the finance page."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from django.db.models import F, Sum
from django.utils.translation import gettext as _

from apps.classification.models import HourlyClass, Reason
from apps.common.buckets import day_end, day_start, month_days, zone_name
from apps.common.composed import SQL, table, text
from apps.common.formats import int_text, money_text
from apps.common.replica import read_connection
from apps.common.tables import Column, Table, month_table
from apps.ingest.models import DimSet
from apps.ledger import conf
from apps.ledger.links import journal_href, month_waste_href
from apps.ledger.mapping import Mapping, mapping_load
from apps.ledger.models import Account, AccrualDay, JournalLine
from apps.ledger.names import Names
from apps.ledger.readings import Hours, day_readings, hours_where
from apps.ledger.services.accrual import PRICED_HOURS_FROM, MonthWindow, month_window

ZERO = Decimal(0)
CENT = Decimal("0.01")

# {rule}: the mapping's rule of a row (Mapping.usage_sql); {priced}: PRICED_HOURS_FROM; {hours}: the
# hours read (readings.hours_where).
_PRICED_SQL = SQL(
    """
SELECT c.currency, d.business_line, r.name, {rule} AS rule_id, (c.hour AT TIME ZONE %s)::date AS day,
       SUM(c.tokens)::bigint, SUM(c.cost)
{priced}WHERE ({hours}) AND r.name LIKE 'waste.%%'
GROUP BY 1, 2, 3, 4, 5
"""
)

_TOKENS_SQL = SQL(
    """
SELECT d.business_line, (c.hour AT TIME ZONE %s)::date AS day, SUM(c.tokens)::bigint FROM {classes} c
JOIN {dims} d ON d.id = c.dims_id JOIN {reasons} r ON r.id = c.reason_id
WHERE ({hours}) AND r.name LIKE 'waste.%%'
GROUP BY 1, 2
"""
)

# (currency, business line as in the dim set, reason, mapping rule, accounting day, tokens, cost)
Priced = tuple[str, str, str, int | None, date, int, Decimal]


@dataclass
class _Reading:
    """What the reconciliation reads of the month: the priced waste of the ledger's window, and
    the page's cost (line, currency, cost) and classified tokens (line, tokens) over its days."""

    priced: list[Priced]
    page_costs: list[tuple[str, str, Decimal]]
    page_tokens: list[tuple[str, int]]


def _priced_rows(mapping: Mapping, zone: ZoneInfo, hours: Hours) -> list[Priced]:
    where, params = hours_where(SQL("c.hour"), hours)
    statement = _PRICED_SQL.format(rule=mapping.usage_sql, priced=PRICED_HOURS_FROM, hours=where)
    with read_connection().cursor() as cursor:
        cursor.execute(text(statement), [*mapping.usage_params, zone.key, *params])
        return [
            (cur, line, reason, rule, day, int(tokens), cost) for cur, line, reason, rule, day, tokens, cost in cursor
        ]


def _token_rows(zone: ZoneInfo, hours: Hours) -> list[tuple[str, date, int]]:
    where, params = hours_where(SQL("c.hour"), hours)
    statement = _TOKENS_SQL.format(classes=table(HourlyClass), dims=table(DimSet), reasons=table(Reason), hours=where)
    with read_connection().cursor() as cursor:
        cursor.execute(text(statement), [zone.key, *params])
        return [(line, day, int(tokens)) for line, day, tokens in cursor]


def _read(month: date, window: MonthWindow, mapping: Mapping) -> _Reading:
    """The month's priced waste and the page's figures. Where the ledger's window is the page's
    days (both in the accounting zone: no closed neighbour moved an edge), both are read day by
    day, through the days' kept readings (apps/ledger/readings.py)."""
    days = month_days(month)
    first, last = day_start(days[0]), day_end(days[-1])
    if window.zone.key != zone_name() or (window.start, window.end) != (first, last):
        page_priced = _priced_rows(mapping, window.zone, [(first, last)])
        return _Reading(
            _priced_rows(mapping, window.zone, [(window.start, window.end)]),
            [(line, cur, cost) for cur, line, _r, _rule, _d, _t, cost in page_priced],
            [(line, tokens) for line, _d, tokens in _token_rows(window.zone, [(first, last)])],
        )

    def read(hours: Hours) -> dict[date, dict[str, list]]:
        found: dict[date, dict[str, list]] = defaultdict(lambda: {"priced": [], "tokens": []})
        for cur, line, reason, rule, day, n, cost in _priced_rows(mapping, window.zone, hours):
            found[day]["priced"].append([cur, line, reason, rule, n, str(cost)])
        for line, day, n in _token_rows(window.zone, hours):
            found[day]["tokens"].append([line, n])
        return found

    priced: list[Priced] = []
    tokens: list[tuple[str, int]] = []
    for day, rows in day_readings("waste", days, window.zone, read, {"priced": [], "tokens": []}).items():
        priced += [
            (cur, line, reason, rule, day, n, Decimal(cost)) for cur, line, reason, rule, n, cost in rows["priced"]
        ]
        tokens += [(line, n) for line, n in rows["tokens"]]
    return _Reading(priced, [(line, cur, cost) for cur, line, _r, _rule, _d, _t, cost in priced], tokens)


@dataclass
class _Side:
    tokens: int = 0
    exact: Decimal = ZERO

    def add(self, tokens: int, cost: Decimal) -> None:
        self.tokens += tokens
        self.exact += cost


@dataclass
class _Centre:
    priced: _Side = field(default_factory=_Side)  # every priced waste row of the month
    booked: _Side = field(default_factory=_Side)  # on the days accrued
    on_waste: _Side = field(default_factory=_Side)  # of that, mapped to the waste account
    elsewhere: _Side = field(default_factory=_Side)  # mapped elsewhere (inside elastic windows)
    reasons: dict[str, list[_Side]] = field(default_factory=lambda: defaultdict(lambda: [_Side(), _Side()]))
    late_days: set[date] = field(default_factory=set)  # days with priced waste, not accrued
    journal: Decimal = ZERO  # the waste account's lines, as booked
    journal_tokens: int = 0


def _priced(
    month: date, mapping: Mapping, reading: _Reading, currency: str, business_lines: list[str] | None
) -> dict[str, _Centre]:
    """Per cost centre the priced waste of the month, on the days accrued and the others."""
    waste_account = Account.objects.filter(role=Account.Role.WASTE).values_list("id", flat=True).first()
    days = month_days(month)
    accrued = set(
        AccrualDay.objects.filter(day__gte=days[0], day__lte=days[-1])
        .exclude(fingerprint="")
        .values_list("day", flat=True)
    )
    unassigned = conf.get("LEDGER_UNASSIGNED")
    centres: dict[str, _Centre] = defaultdict(_Centre)
    for cur, line, reason, rule, day, tokens, cost in reading.priced:
        cc = line or unassigned
        if cur != currency or (business_lines is not None and cc not in business_lines):
            continue
        centre = centres[cc]
        centre.priced.add(tokens, cost)
        if day not in accrued:
            centre.late_days.add(day)
            continue
        centre.booked.add(tokens, cost)
        inside = mapping.account_of(rule) != waste_account
        (centre.elsewhere if inside else centre.on_waste).add(tokens, cost)
        centre.reasons[reason][0].add(tokens, cost)
        if inside:
            centre.reasons[reason][1].add(tokens, cost)
    return centres


def _journal(month: date, currency: str, business_lines: list[str] | None, centres: dict[str, _Centre]) -> None:
    lines = JournalLine.objects.filter(
        period_id=month, entry__kind="accrual", account__role=Account.Role.WASTE, currency=currency
    )
    if business_lines is not None:
        lines = lines.filter(cost_centre__in=business_lines)
    for row in lines.values("cost_centre").annotate(net=Sum(F("debit") - F("credit")), tokens=Sum("tokens")):
        centres[row["cost_centre"]].journal += row["net"]
        centres[row["cost_centre"]].journal_tokens += row["tokens"]


def _page(reading: _Reading, currency: str, business_lines: list[str] | None) -> dict[str, tuple[int, Decimal]]:
    """What /waste/?from=<first day>&to=<last day>&class=waste shows per business line: its
    tokens, and their cost in `currency`."""
    unassigned = conf.get("LEDGER_UNASSIGNED")
    costs: dict[str, Decimal] = defaultdict(Decimal)
    for line, cur, cost in reading.page_costs:
        if cur == currency and (business_lines is None or line in business_lines):
            costs[line] += cost
    tokens: dict[str, int] = defaultdict(int)
    for line, count in reading.page_tokens:
        if business_lines is None or line in business_lines:
            tokens[line] += count
    shown: dict[str, tuple[int, Decimal]] = {}
    for line, count in tokens.items():
        before_tokens, before_cost = shown.get(line or unassigned, (0, ZERO))
        shown[line or unassigned] = (before_tokens + count, before_cost + costs.get(line, ZERO))
    return shown


def _cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def _days_text(days: set[date]) -> str:
    shown = [f"{d:%Y-%m-%d}" for d in sorted(days)[:3]]
    return ", ".join(shown) + (", ..." if len(days) > 3 else "")


def _why(centre: _Centre, page_tokens: int, page_exact: Decimal) -> list[str]:
    """The named parts of a difference between the page and the ledger (page - ledger; empty:
    they agree). The parts add up to the difference."""
    why = []
    unpriced = page_tokens - centre.priced.tokens
    if unpriced:
        why.append(
            _("%(tokens)s tokens not priced: /waste/ counts them, the ledger books priced tokens only")
            % {"tokens": int_text(unpriced)}
        )
    late_tokens, late = centre.priced.tokens - centre.booked.tokens, centre.priced.exact - centre.booked.exact
    if late_tokens or _cents(late):
        why.append(
            _("%(amount)s (%(tokens)s tokens) not booked yet, on days not accrued: %(days)s")
            % {"amount": money_text(late), "tokens": int_text(late_tokens), "days": _days_text(centre.late_days)}
        )
    drift_tokens, drift = centre.on_waste.tokens - centre.journal_tokens, _cents(centre.on_waste.exact) - centre.journal
    if drift_tokens:
        why.append(
            _("%(amount)s (%(tokens)s tokens) priced after their day was accrued: the next accrual books it")
            % {"amount": money_text(drift), "tokens": int_text(drift_tokens)}
        )
    elif drift:
        why.append(_("%(amount)s rounding to cents in the journal") % {"amount": money_text(drift)})
    stale = _cents(page_exact) - _cents(centre.priced.exact)
    if stale:
        why.append(
            _("%(amount)s between the rollups and the priced rows (rollups not rebuilt yet)")
            % {"amount": money_text(stale)}
        )
    return why


def waste_tables(*, month: date, currency: str, names: Names, business_lines: list[str] | None) -> list[Table]:
    """The waste per cost centre reconciled to /waste/, and the waste per cost centre and reason."""
    window, mapping = month_window(month), mapping_load()
    reading = _read(month, window, mapping)
    centres = _priced(month, mapping, reading, currency, business_lines)
    _journal(month, currency, business_lines, centres)
    page = _page(reading, currency, business_lines)
    for cc in page:
        centres.setdefault(cc, _Centre())
    return [
        _reconciled(month, currency, names, centres, page),
        _reasons(month, currency, names, centres),
    ]


def _reconciled(
    month: date,
    currency: str,
    names: Names,
    centres: dict[str, _Centre],
    page: dict[str, tuple[int, Decimal]],
) -> Table:
    waste_code = Account.objects.filter(role=Account.Role.WASTE).values_list("code", flat=True).first() or ""
    elastic_code = Account.objects.filter(role=Account.Role.ELASTIC).values_list("code", flat=True).first() or ""
    cur = f" ({currency})"
    table = month_table(
        "waste",
        _("Waste in the books against the /waste/ page, %(month)s (%(currency)s)"),
        [
            Column("cost_centre", _("Cost centre")),
            Column("tokens", _("Waste tokens (ledger)"), "int"),
            Column("amount", _("Waste (ledger)") + cur, "money"),
            Column("on_waste", _("On the waste account") + cur, "money"),
            Column("elastic", _("Inside elastic windows, on other accounts") + cur, "money"),
            Column("page_tokens", _("Waste tokens (/waste/)"), "int"),
            Column("page_amount", _("Waste (/waste/)") + cur, "money"),
            Column("diff_tokens", _("Difference, tokens"), "int"),
            Column("diff_amount", _("Difference") + cur, "money"),
            Column("status", _("Reconciliation")),
        ],
        month=month,
        currency=currency,
    )
    rows = table.rows
    for cc in sorted(centres, key=names.centre):
        centre = centres[cc]
        page_tokens, page_exact = page.get(cc, (0, ZERO))
        amount = centre.journal + _cents(centre.elsewhere.exact)
        tokens = centre.journal_tokens + centre.elsewhere.tokens
        why = _why(centre, page_tokens, page_exact)
        diff_tokens, diff_amount = page_tokens - tokens, _cents(page_exact) - amount
        agrees = not diff_tokens and not diff_amount
        status = _("agrees") if agrees else _("differs: %(why)s") % {"why": "; ".join(why) or _("unexplained")}
        rows.append(
            {
                "cost_centre": names.centre(cc),
                "tokens": tokens,
                "amount": amount,
                "on_waste": centre.journal,
                "elastic": _cents(centre.elsewhere.exact),
                "page_tokens": page_tokens,
                "page_amount": _cents(page_exact),
                "diff_tokens": diff_tokens,
                "diff_amount": diff_amount,
                "status": status,
            }
        )
        i = len(rows) - 1
        page_href = month_waste_href(month=month, business_line=cc, **{"class": "waste"})
        table.links[(i, "cost_centre")] = table.links[(i, "page_amount")] = table.links[(i, "page_tokens")] = page_href
        table.links[(i, "on_waste")] = journal_href(month=month, account=waste_code, cost_centre=cc, currency=currency)
        if centre.elsewhere.tokens:
            table.links[(i, "elastic")] = journal_href(
                month=month, account=elastic_code, cost_centre=cc, currency=currency
            )
    return table


def _reasons(month: date, currency: str, names: Names, centres: dict[str, _Centre]) -> Table:
    cur = f" ({currency})"
    table = month_table(
        "waste_reasons",
        _("Waste by cost centre and reason, %(month)s (%(currency)s)"),
        [
            Column("cost_centre", _("Cost centre")),
            Column("reason", _("Reason")),
            Column("tokens", _("Waste tokens (ledger)"), "int"),
            Column("amount", _("Waste (ledger)") + cur, "money"),
            Column("elastic_tokens", _("Of which inside elastic windows, tokens"), "int"),
            Column("elastic", _("Of which inside elastic windows") + cur, "money"),
        ],
        month=month,
        currency=currency,
    )
    rows = table.rows
    for cc in sorted(centres, key=names.centre):
        for reason, (booked, inside) in sorted(centres[cc].reasons.items()):
            rows.append(
                {
                    "cost_centre": names.centre(cc),
                    "reason": reason,
                    "tokens": booked.tokens,
                    "amount": _cents(booked.exact),
                    "elastic_tokens": inside.tokens,
                    "elastic": _cents(inside.exact),
                }
            )
            table.links[(len(rows) - 1, "reason")] = month_waste_href(month=month, business_line=cc, reason=reason)
    return table
