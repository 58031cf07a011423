"""Closing and reopening months.

Close: in one transaction holding the month's accrual lock and its period row FOR UPDATE,
complete the month's journal (accrue every day that changed), run the month-end checks
(stored as findings), then mark the period closed and record the event. From then on
PostgreSQL refuses any change to the month's journal rows; later changes to its days become
adjusting entries in the next open month.

Reopen: admin only, with a reason; the event is recorded in the same transaction, which is
what the period trigger requires to let a closed period open again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from apps.accounts.roles import user_has_role
from apps.common.buckets import BucketError, month_of, next_month, zone_name
from apps.common.buckets import parse_month as _parse_month
from apps.ledger.models import Account, AccrualDay, Finding, JournalEntry, JournalLine, Period, PeriodEvent
from apps.ledger.rounding import round_half_up
from apps.ledger.services.accrual import MonthResult, month_accrue, month_lock, month_window
from apps.ledger.services.checks import month_checks
from apps.ledger.signals import period_closed
from apps.pricing.models import MINOR_UNITS

NOT_ENDED = "{month} has not ended yet: a period closes after its last day"
ALREADY_CLOSED = "{month} is already closed"
NOT_CLOSED = "{month} is not closed"
REOPEN_NEEDS_ADMIN = "reopening a period needs the admin role"
REOPEN_NEEDS_REASON = "say why the period is reopened (it is recorded)"


class PeriodError(ValueError):
    pass


def parse_month(value: str, *, error: Callable[[str], Exception] = PeriodError) -> date:
    """'2026-11' -> date(2026, 11, 1); otherwise `error(message)` is raised: PeriodError, or
    what the caller answers bad input with (a 404 for a page, a field error for the API)."""
    try:
        return _parse_month(value)
    except BucketError as exc:
        raise error(str(exc)) from exc


@dataclass
class CurrencyTotal:
    currency: str
    debits: Decimal
    credits: Decimal
    booked: Decimal  # net expense of the month's usage days, in every period (adjustments included, bill ones not)
    priced: Decimal  # the month's exact priced total, rounded once to the minor unit


@dataclass
class CloseResult:
    period: Period
    accrual: MonthResult
    findings: list[Finding]
    totals: list[CurrencyTotal] = field(default_factory=list)


def period_ensure(*, month: date) -> Period:
    period, _ = Period.objects.get_or_create(month=month_of(month))
    return period


def period_close(*, month: date, user: Any = None, now: datetime | None = None) -> CloseResult:
    """Complete the month's journal, run its checks and lock it (see the module docstring)."""
    month = month_of(month)
    now = now or timezone.now()
    if month_window(month).end > now:
        raise PeriodError(NOT_ENDED.format(month=f"{month:%Y-%m}"))
    period_ensure(month=month)
    with transaction.atomic(), connection.cursor() as cursor:
        month_lock(cursor, month)  # before the row lock: the order accrual takes them in
        period = Period.objects.select_for_update().get(month=month)
        if period.status == Period.Status.CLOSED:
            raise PeriodError(ALREADY_CLOSED.format(month=f"{month:%Y-%m}"))
        accrual = month_accrue(month=month)
        findings = month_checks(month=month)
        # The month keeps the zone it was accrued in from now on (it was just accrued in this one).
        period.status, period.closed_at, period.closed_by, period.tz = Period.Status.CLOSED, now, user, zone_name()
        period.save(update_fields=["status", "closed_at", "closed_by", "tz"])
        PeriodEvent.objects.create(period=period, action=PeriodEvent.Action.CLOSE, user=user)
        period_closed.send(sender=Period, month=month)
    return CloseResult(period, accrual, findings, month_totals(month=month))


def period_reopen(*, month: date, user: Any, reason: str) -> Period:
    """Open a closed month again (admin only, recorded with the reason)."""
    if not user_has_role(user, "admin"):
        raise PermissionDenied(REOPEN_NEEDS_ADMIN)
    if not reason.strip():
        raise PeriodError(REOPEN_NEEDS_REASON)
    month = month_of(month)
    with transaction.atomic():
        period = Period.objects.select_for_update().filter(month=month).first()
        if period is None or period.status != Period.Status.CLOSED:
            raise PeriodError(NOT_CLOSED.format(month=f"{month:%Y-%m}"))
        PeriodEvent.objects.create(period=period, action=PeriodEvent.Action.REOPEN, user=user, note=reason.strip())
        period.status, period.closed_at, period.closed_by = Period.Status.OPEN, None, None
        period.save(update_fields=["status", "closed_at", "closed_by"])
    return period


def month_totals(*, month: date) -> list[CurrencyTotal]:
    """Per currency: the period's debits and credits, the booked net expense of the month's
    usage days (wherever posted) and the month's priced total rounded once. The last two are
    equal whenever the month's journal is complete (the rounding carry guarantees it)."""
    month = month_of(month)
    payable = Account.objects.filter(role=Account.Role.PAYABLE).values_list("pk", flat=True).first()
    posted = (
        JournalLine.objects.filter(period_id=month)
        .values("currency")
        .annotate(debits=Sum("debit"), credits=Sum("credit"))
    )
    booked = (
        JournalLine.objects.filter(day__gte=month, day__lt=next_month(month))
        .exclude(account_id=payable)
        .exclude(entry__kind=JournalEntry.Kind.BILL)  # a supplier bill's difference is not priced usage
        .values("currency")
        .annotate(debits=Sum("debit"), credits=Sum("credit"))
    )
    exact: dict[str, Decimal] = defaultdict(Decimal)
    for state in AccrualDay.objects.filter(day__gte=month, day__lt=next_month(month)):
        for currency, amount in state.exact.items():
            exact[currency] += Decimal(amount)
    by_currency: dict[str, CurrencyTotal] = {}
    for currency in sorted({r["currency"] for r in posted} | {r["currency"] for r in booked} | set(exact)):
        places = MINOR_UNITS.get(currency, 2)  # type: ignore[call-overload]
        by_currency[currency] = CurrencyTotal(
            currency, Decimal(0), Decimal(0), Decimal(0), round_half_up(exact[currency], places)
        )
    for row in posted:
        by_currency[row["currency"]].debits = row["debits"]
        by_currency[row["currency"]].credits = row["credits"]
    for row in booked:
        by_currency[row["currency"]].booked = row["debits"] - row["credits"]
    return list(by_currency.values())
