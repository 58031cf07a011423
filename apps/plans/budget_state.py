"""Where each budget of the accounting month stands: what its scope (the line, one team of it,
one caller of it, or one caller within one team; any of these narrowed to one value of another
rollup dim, `user=u-42`) has used so far, read from the hourly rollups, and whether a hard budget
now holds (spent, no active override). A team is the rollups' `team` dim, a caller their `caller`
dim (the attribution map's name of who called, set by the edges), a dim value that dim's value.

The edge (wire/budgets.py, polling GET /api/v1/budgets/state) refuses new requests of a budget
that holds; /metrics and the budgets page show the same figures. Money comes from pricing's
HourlyCost in the budget's currency (so it lags by the pricing run), tokens from ingest's
HourlyUsage (written with the records, so it lags only by the edge's shipping).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection

from apps.common.buckets import month_end, month_of, month_start
from apps.common.composed import SQL, Composable, col, table, text
from apps.ingest.models import DimSet, HourlyUsage, Status
from apps.plans.models import Budget, BudgetOverride, budget_scope
from apps.pricing.models import HourlyCost

# Tokens a budget counts: every prompt token (cached ones included) and every generated one.
TOKENS = "(u.prompt + u.completion)"
# A line's usage keyed by (business line, team, caller, dim, value, ...); "" sums every team
# (caller); dim "" and value "" sum every value of every dim.
Usage = dict[tuple[Any, ...], Any]


@dataclass(frozen=True)
class BudgetState:
    id: int
    business_line: str
    team: str
    caller: str
    dim: str
    value: str
    month: date
    hard: bool
    currency: str
    amount: Decimal | None
    tokens: int | None
    used_amount: Decimal
    used_tokens: int
    refused: int  # requests of the scope rejected this month (refusals by the edge among them)
    resets_at: datetime
    override_until: datetime | None = None
    override_reason: str = ""

    @property
    def spent(self) -> bool:
        """Whether money or tokens reached the limit (either one spends the budget)."""
        over_money = self.amount is not None and self.used_amount >= self.amount
        return over_money or (self.tokens is not None and self.used_tokens >= self.tokens)

    @property
    def overridden(self) -> bool:
        return self.override_until is not None

    @property
    def holds(self) -> bool:
        """Whether the edge refuses the budget's new requests now."""
        return self.hard and self.spent and not self.overridden

    @property
    def scope(self) -> str:
        return budget_scope(self.business_line, self.team, self.caller, self.dim, self.value)


def budget_states(*, now: datetime, business_lines: list[str] | None = None) -> list[BudgetState]:
    """The budgets of the accounting month holding `now`, with their use; only the lines in
    `business_lines` unless it is None."""
    month = month_of(now)
    budgets = list(Budget.objects.filter(month=month).order_by("business_line", "team", "caller", "dim", "value"))
    if business_lines is not None:
        budgets = [b for b in budgets if b.business_line in business_lines]
    if not budgets:
        return []
    lines = sorted({b.business_line for b in budgets})
    start, end = month_start(month), month_end(month)
    window = _Window(lines, start, end, sorted({b.dim for b in budgets if b.dim}))
    money, tokens, refused = _money(window), _tokens(window), _refused(window)
    overrides = _active_overrides([b.id for b in budgets], now)
    states = []
    for b in budgets:
        override = overrides.get(b.id)
        scope = (b.business_line, b.team, b.caller, b.dim, b.value)
        states.append(
            BudgetState(
                id=b.id,
                business_line=b.business_line,
                team=b.team,
                caller=b.caller,
                dim=b.dim,
                value=b.value,
                month=month,
                hard=b.hard,
                currency=b.currency,
                amount=b.amount,
                tokens=b.tokens,
                used_amount=money.get((*scope, b.currency), Decimal(0)),
                used_tokens=int(tokens.get(scope, 0)),
                refused=int(refused.get(scope, 0)),
                resets_at=end,
                override_until=override.until if override else None,
                override_reason=override.reason if override else "",
            )
        )
    return states


def _rows(statement: Composable, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(text(statement), params)
        return cursor.fetchall()


@dataclass(frozen=True)
class _Window:
    """What the budgets read: their lines, the month's bounds and the dims budgets are of."""

    lines: list[str]
    start: datetime
    end: datetime
    dims: list[str]


def _by_scope(rows: list[tuple[Any, ...]], width: int, dim: str = "") -> Usage:
    """Sum rows of (line, team, caller, dim's value, *key, value) into every scope a budget may
    have: the whole line (team "", caller ""), its team, its caller, and its caller within its
    team; with `dim`, each of them narrowed to the row's value of it (rows without it left out)."""
    out: Usage = defaultdict(int)
    for row in rows:
        line, team, caller, of_dim = row[0], row[1] or "", row[2] or "", row[3] or ""
        if dim and not of_dim:
            continue
        key, value = tuple(row[4:width]), row[width]
        for scope_team in {"", team}:
            for scope_caller in {"", caller}:
                out[(line, scope_team, scope_caller, dim, of_dim if dim else "", *key)] += value
    return out


def _usage(statement: Composable, window: _Window, width: int, *extra: Any) -> Usage:
    """The statement's rows summed by scope: once for the budgets of no dim, once per dim a
    budget is of (the statement's first parameter names the dim whose value it reads)."""
    bounds = [window.start, window.end, window.lines, *extra]
    out = _by_scope(_rows(statement, [None, *bounds]), width)
    for dim in window.dims:
        out.update(_by_scope(_rows(statement, [dim, *bounds]), width, dim))
    return out


# The scope of a rollup row: its line, team and caller (the edges' name of who called), and its
# value of the dim a budget is of (a parameter: NULL, for none, reads NULL).
_SCOPE = SQL("d.business_line, d.dims->>'team', d.dims->>'caller', d.dims->>%s::text")
_USAGE, _COSTS, _DIMS = table(HourlyUsage), table(HourlyCost), table(DimSet)


def _from_dims(alias: str) -> Composable:
    """The join to the row's dim set and the window and lines of the budgets read."""
    hour = col(alias, "hour")
    return SQL(
        "JOIN {dims} d ON d.id = {row_dims} WHERE {hour} >= %s AND {hour} < %s AND d.business_line = ANY(%s)"
    ).format(dims=_DIMS, row_dims=col(alias, "dims_id"), hour=hour)


_MONEY = SQL("SELECT {scope}, c.currency, sum(c.cost) FROM {costs} c {where} GROUP BY 1, 2, 3, 4, 5").format(
    scope=_SCOPE, costs=_COSTS, where=_from_dims("c")
)
_TOKENS = SQL("SELECT {scope}, sum({tokens}) FROM {usage} u {where} GROUP BY 1, 2, 3, 4").format(
    scope=_SCOPE, tokens=SQL(TOKENS), usage=_USAGE, where=_from_dims("u")
)
_REFUSED = SQL("SELECT {scope}, sum(u.records) FROM {usage} u {where} AND u.status = %s GROUP BY 1, 2, 3, 4").format(
    scope=_SCOPE, usage=_USAGE, where=_from_dims("u")
)
_LINE_TOKENS = SQL(
    "SELECT COALESCE(NULLIF(d.business_line, ''), %s), sum({tokens}) FROM {usage} u "
    "JOIN {dims} d ON d.id = u.dims_id WHERE u.hour >= %s AND u.hour < %s GROUP BY 1"
).format(tokens=SQL(TOKENS), usage=_USAGE, dims=_DIMS)


def _money(window: _Window) -> Usage:
    return _usage(_MONEY, window, 5)


def _tokens(window: _Window) -> Usage:
    return _usage(_TOKENS, window, 4)


def tokens_by_line(*, month: date, unassigned: str) -> dict[str, int]:
    """Tokens as a budget counts them (TOKENS), per business line, in an accounting month: every
    line (those without a budget too), records of no line under `unassigned` (the ledger's cost
    centre for them). What the budgets page compares with each line's token budget."""
    bounds = [month_start(month_of(month)), month_end(month_of(month))]
    return {line: int(count) for line, count in _rows(_LINE_TOKENS, [unassigned, *bounds])}


def _refused(window: _Window) -> Usage:
    return _usage(_REFUSED, window, 4, Status.REJECTED)


def _active_overrides(budget_ids: list[int], now: datetime) -> dict[int, BudgetOverride]:
    """Per budget, its override running longest among those active at `now`."""
    out: dict[int, BudgetOverride] = {}
    for override in BudgetOverride.objects.filter(budget_id__in=budget_ids, until__gt=now).order_by("until"):
        out[override.budget_id] = override
    return out
