"""A month's close as finance does it: a checklist computed live, a preparer who submits the
month with a note, and a different person who approves it (which closes the period through
`period_close`) or rejects it; the preparer may withdraw. Reopening stays `period_reopen`
(admin, with a reason).

Closing is a company-wide act: submitting, approving, rejecting and withdrawing need the
finance or admin role and a user who sees every business line. A user scoped to some lines
may read the checklist, restricted to their lines.

The checklist of a request is stored as it stood when submitted, in English (the msgids), as
a list of {"key", "label", "value", "ok", "detail"}; pages translate the labels.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of
from apps.classification.models import DirtyDay as ClassDirtyDay
from apps.classification.models import HourlyClass
from apps.common.buckets import day_of, month_days, month_of, next_month
from apps.ingest.models import DimSet
from apps.ledger import conf
from apps.ledger.mapping import mapping_load
from apps.ledger.models import Account, AccrualDay, Budget, CloseRequest, DirtyDay, Finding, JournalLine, Period
from apps.ledger.services.accrual import _fingerprints, analytic_cursor, month_window
from apps.ledger.services.checks import month_findings
from apps.ledger.services.periods import ALREADY_CLOSED, NOT_ENDED, CloseResult, period_close
from apps.ledger.services.rates import missing_rates
from apps.pricing.models import DirtyHour
from apps.pricing.selectors import unpriced_models

NEEDS_FINANCE = gettext_noop("closing a month needs the finance or admin role")
COMPANY_ACT = gettext_noop(
    "closing a month is a company-wide act: it needs a user who sees every business line "
    "(yours is limited to some lines)"
)
ALREADY_WAITING = gettext_noop("{month} already has a close request waiting for a decision")
NOTHING_WAITING = gettext_noop("{month} has no close request waiting for a decision")
OWN_REQUEST = gettext_noop(
    "you prepared this close request: a different finance user (or an admin) approves or rejects it"
)
NOT_YOURS = gettext_noop("only the user who prepared a close request can withdraw it")
REJECT_NEEDS_NOTE = gettext_noop("say why the close is rejected (the preparer reads it)")


class CloseError(ValueError):
    pass


# --- the checklist -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckItem:
    key: str
    label: str  # an English msgid; pages translate it
    value: str | int
    ok: bool
    detail: str
    link: str = ""  # where to fix it

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "value": self.value, "ok": self.ok, "detail": self.detail}


def close_checklist(
    *, month: date, business_lines: list[str] | None = None, now: datetime | None = None
) -> list[CheckItem]:
    """What stands between `month` and a clean close, computed now. Items naming business
    lines (findings, budgets) hold only `business_lines` unless it is None; the others are
    company-wide counts that name no line."""
    month = month_of(month)
    now = now or timezone.now()
    return [
        _unpriced(month),
        _unattributed(month),
        _not_accrued(month, now),
        _dirty(month),
        _findings(month, business_lines),
        _budgets_unspent(month, business_lines),
        _missing_rates(month),
    ]


def _unpriced(month: date) -> CheckItem:
    window = month_window(month)
    models = unpriced_models(start=window.start, end=window.end)
    tokens = sum(m.tokens for m in models)
    listed = ", ".join(f"{m.model} ({m.tokens:,})" for m in models[:10])
    detail = (
        _("Models with tokens but neither a price nor a cost pool: %(models)s. Their cost is missing, not 0.")
        % {"models": listed}
        if models
        else _("Every model with tokens this month has a price or a cost pool.")
    )
    return CheckItem(
        "unpriced_models",
        gettext_noop("Unpriced models"),
        len(models),
        not tokens,
        detail,
        reverse("prices"),
    )


def _missing_rates(month: date) -> CheckItem:
    missing = missing_rates(start=month, end=next_month(month))
    listed = ", ".join(
        f"{m.day} {m.currency}/{m.to} ({m.amount.quantize(Decimal('0.01'))} {m.currency})" for m in missing[:15]
    ) + (" …" if len(missing) > 15 else "")
    detail = (
        _(
            "Days with costs priced in another currency and no rate into the functional one: %(days)s. "
            "They are not booked (not booked as 0) until the rate is entered."
        )
        % {"days": listed}
        if missing
        else _("Every day's costs in other currencies have their day's rate.")
    )
    return CheckItem(
        "missing_rates",
        gettext_noop("Missing exchange rates"),
        len(missing),
        not missing,
        detail,
        reverse("finance-rates"),
    )


def _unattributed(month: date) -> CheckItem:
    window = month_window(month)
    with analytic_cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(h.tokens) FILTER (WHERE d.business_line = ''), 0), COALESCE(SUM(h.tokens), 0) "
            f"FROM {HourlyClass._meta.db_table} h JOIN {DimSet._meta.db_table} d ON d.id = h.dims_id "
            "WHERE h.hour >= %s AND h.hour < %s",
            [window.start, window.end],
        )
        unassigned, total = cursor.fetchone()
    share = Decimal(unassigned) / Decimal(total) if total else Decimal(0)
    money = _unassigned_money(month)
    spent = "; ".join(f"{amount:,} {currency}" for currency, amount in sorted(money.items()) if amount)
    detail = (
        _("%(tokens)s of %(total)s tokens carry no business line (booked to the cost centre “%(cc)s”: %(money)s).")
        % {"tokens": f"{unassigned:,}", "total": f"{total:,}", "cc": conf.get("LEDGER_UNASSIGNED"), "money": spent or 0}
        if unassigned
        else _("Every token of the month carries a business line.")
    )
    value = f"{(share * 100).quantize(Decimal('0.1'))} %"
    return CheckItem(
        "unattributed",
        gettext_noop("Unattributed share"),
        value,
        not unassigned,
        detail,
        reverse("dashboards:overview"),
    )


def _unassigned_money(month: date) -> dict[str, Decimal]:
    # Usage lines only: idle capacity (a pool line, no model) is booked to the same cost centre on purpose.
    rows = (
        JournalLine.objects.filter(
            day__gte=month,
            day__lt=next_month(month),
            account__kind=Account.Kind.EXPENSE,
            cost_centre=conf.get("LEDGER_UNASSIGNED"),
            model__isnull=False,
        )
        .values("currency")
        .annotate(net=Sum(F("debit") - F("credit")))
    )
    return {r["currency"]: r["net"] for r in rows}


def stale_days(*, month: date, now: datetime | None = None) -> list[date]:
    """Days of `month`, up to today, whose priced rows are not booked as they stand: priced but
    never accrued, or accrued from rows (or a mapping, or bounds) that changed since. The same
    fingerprints the accrual job compares."""
    month = month_of(month)
    today = day_of(now or timezone.now())
    prints = _fingerprints(month_window(month), mapping_load().version)
    stored = dict(
        AccrualDay.objects.filter(day__gte=month, day__lt=next_month(month)).values_list("day", "fingerprint")
    )
    return [
        day
        for day in month_days(month)
        if day <= today and (day in prints or day in stored) and stored.get(day) != prints.get(day, "")
    ]


def _not_accrued(month: date, now: datetime) -> CheckItem:
    days = stale_days(month=month, now=now)
    listed = ", ".join(f"{d:%m-%d}" for d in days[:15]) + (" …" if len(days) > 15 else "")
    detail = (
        _(
            "Priced days not booked as they stand: %(days)s. The accrual job books them within minutes; "
            "approval books them too."
        )
        % {"days": listed}
        if days
        else _("Every priced day up to today is booked as its rows stand.")
    )
    return CheckItem(
        "days_not_accrued",
        gettext_noop("Days not yet accrued"),
        len(days),
        not days,
        detail,
        f"{reverse('finance')}?month={month:%Y-%m}#periods",
    )


def _dirty(month: date) -> CheckItem:
    window = month_window(month)
    days = month_days(month)
    # A day is a date in the zone it was marked in: one day either side may belong to this month.
    near = (days[0] - timedelta(days=1), days[-1] + timedelta(days=1))
    ledger = DirtyDay.objects.filter(day__gte=near[0], day__lte=near[1]).values("day").distinct().count()
    hours = DirtyHour.objects.filter(hour__gte=window.start, hour__lt=window.end).values("hour").distinct().count()
    classes = ClassDirtyDay.objects.filter(day__gte=near[0], day__lte=near[1]).count()
    total = ledger + hours + classes
    detail = (
        _(
            "Waiting to be processed: %(ledger)s days to re-book, %(hours)s hours to re-price, %(classes)s days to "
            "re-classify. The jobs pick them up within minutes; the books may still change."
        )
        % {"ledger": ledger, "hours": hours, "classes": classes}
        if total
        else _("No day of the month waits for re-classification, re-pricing or re-booking.")
    )
    return CheckItem("dirty_days", gettext_noop("Dirty days"), total, not total, detail, reverse("prices"))


FINDING_NAMES = {
    Finding.Kind.EFFECTIVE_SHARE_LOW: gettext_noop("effective share low"),
    Finding.Kind.ELASTIC_OVER_REVENUE: gettext_noop("elastic spend over revenue"),
    Finding.Kind.REVENUE_MISSING: gettext_noop("revenue missing"),
    Finding.Kind.STRUCTURAL_ZERO: gettext_noop("no structural spend"),
    Finding.Kind.BILL_UNRECONCILED: gettext_noop("supplier bill not reconciled"),
}


def _findings(month: date, business_lines: list[str] | None) -> CheckItem:
    """Open: a stored finding not yet delivered; before the close (none stored yet), what the
    month-end checks would find now."""
    closed = Period.objects.filter(month=month, status=Period.Status.CLOSED).exists()
    if closed:
        found = list(Finding.objects.filter(period=month, delivered_at__isnull=True))
    else:
        found = month_findings(month=month)
    if business_lines is not None:
        found = [f for f in found if f.business_line in business_lines]
    listed = "; ".join(f"{_(FINDING_NAMES[f.kind])}: {f.business_line or _('the company')}" for f in found[:10])
    detail = (
        _("Month-end checks: %(findings)s.") % {"findings": listed}
        if found
        else _("The month-end checks find nothing to act on.")
    )
    return CheckItem(
        "open_findings",
        gettext_noop("Open findings"),
        len(found),
        not found,
        detail,
        f"{reverse('finance')}?month={month:%Y-%m}#findings",
    )


def _budgets_unspent(month: date, business_lines: list[str] | None) -> CheckItem:
    budgets = Budget.objects.of_lines().filter(month=month)
    if business_lines is not None:
        budgets = budgets.filter(business_line__in=business_lines)
    booked = set(
        JournalLine.objects.filter(day__gte=month, day__lt=next_month(month), account__kind=Account.Kind.EXPENSE)
        .exclude(debit=0, credit=0, tokens=0)
        .values_list("cost_centre", flat=True)
        .distinct()
    )
    lines = sorted(b.business_line for b in budgets if b.business_line not in booked)
    detail = (
        _("Budgeted but nothing booked: %(lines)s. A wrong business line in the budget, or records missing?")
        % {"lines": ", ".join(lines[:10])}
        if lines
        else _("Every budgeted business line has booked spend.")
    )
    link = reverse("finance-plans", kwargs={"month": f"{month:%Y-%m}"})
    return CheckItem("budgets_unspent", gettext_noop("Budgets without actuals"), len(lines), not lines, detail, link)


# --- the workflow --------------------------------------------------------------------------------


def _closer_check(user: Any) -> None:
    if not user_has_role(user, "finance", "admin"):
        raise PermissionDenied(_(NEEDS_FINANCE))
    if business_lines_of(user) is not None:
        raise PermissionDenied(_(COMPANY_ACT))


def _label(month: date) -> str:
    return f"{month:%Y-%m}"


def close_request_submit(*, month: date, user: Any, note: str = "", now: datetime | None = None) -> CloseRequest:
    """Submit `month` for closing, with the checklist as it stands now."""
    _closer_check(user)
    month, now = month_of(month), now or timezone.now()
    if month_window(month).end > now:
        raise CloseError(_(NOT_ENDED).format(month=_label(month)))
    if Period.objects.filter(month=month, status=Period.Status.CLOSED).exists():
        raise CloseError(_(ALREADY_CLOSED).format(month=_label(month)))
    with translation.override("en"):  # stored as the msgids: each reader translates
        checklist = [item.as_json() for item in close_checklist(month=month, now=now)]
    try:
        with transaction.atomic():
            return CloseRequest.objects.create(month=month, checklist=checklist, prepared_by=user, note=note.strip())
    except IntegrityError as exc:  # ledger_close_request_one_open
        raise CloseError(_(ALREADY_WAITING).format(month=_label(month))) from exc


def _waiting(month: date) -> CloseRequest:
    """The month's waiting request, locked (call inside a transaction)."""
    found = CloseRequest.objects.select_for_update().filter(month=month, state=CloseRequest.State.SUBMITTED).first()
    if found is None:
        raise CloseError(_(NOTHING_WAITING).format(month=_label(month)))
    return found


def _decide(request: CloseRequest, state: str, user: Any, note: str) -> CloseRequest:
    request.state, request.decided_by, request.decision_note = state, user, note.strip()
    request.decided_at = timezone.now()
    request.save(update_fields=["state", "decided_by", "decision_note", "decided_at"])
    return request


def close_request_approve(
    *, month: date, user: Any, note: str = "", now: datetime | None = None
) -> tuple[CloseRequest, CloseResult]:
    """Approve the month's waiting request and close the period, in one transaction: if the
    close fails (the month has not ended, it is already closed) the request keeps waiting."""
    _closer_check(user)
    month = month_of(month)
    with transaction.atomic():
        request = _waiting(month)
        if request.prepared_by_id == user.pk:
            raise PermissionDenied(_(OWN_REQUEST))
        result = period_close(month=month, user=user, now=now)
        return _decide(request, CloseRequest.State.APPROVED, user, note), result


def close_request_reject(*, month: date, user: Any, note: str) -> CloseRequest:
    """Send the month's waiting request back to its preparer, with the reason."""
    _closer_check(user)
    if not note.strip():
        raise CloseError(_(REJECT_NEEDS_NOTE))
    with transaction.atomic():
        request = _waiting(month_of(month))
        if request.prepared_by_id == user.pk:
            raise PermissionDenied(_(OWN_REQUEST))
        return _decide(request, CloseRequest.State.REJECTED, user, note)


def close_request_withdraw(*, month: date, user: Any, note: str = "") -> CloseRequest:
    """The preparer takes their waiting request back."""
    _closer_check(user)
    with transaction.atomic():
        request = _waiting(month_of(month))
        if request.prepared_by_id != user.pk:
            raise PermissionDenied(_(NOT_YOURS))
        return _decide(request, CloseRequest.State.WITHDRAWN, user, note)


# --- history -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEvent:
    at: datetime
    action: str  # submitted, approved, rejected, withdrawn, closed, reopened
    who: str
    note: str


def close_history(*, month: date) -> list[HistoryEvent]:
    """Every step of the month's close, newest first: requests and their decisions, and the
    period's close and reopen events (whichever path made them)."""
    month = month_of(month)
    events: list[HistoryEvent] = []
    for request in CloseRequest.objects.filter(month=month).select_related("prepared_by", "decided_by"):
        events.append(HistoryEvent(request.submitted_at, "submitted", _name(request.prepared_by), request.note))
        if request.decided_at is not None:
            events.append(
                HistoryEvent(request.decided_at, request.state, _name(request.decided_by), request.decision_note)
            )
    period = Period.objects.filter(month=month).first()
    if period is not None:
        for event in period.events.select_related("user"):
            action = "closed" if event.action == event.Action.CLOSE else "reopened"
            events.append(HistoryEvent(event.at, action, _name(event.user), event.note))
    order = defaultdict(int, {"submitted": 0, "closed": 1, "approved": 2})  # a close and its approval share an instant
    return sorted(events, key=lambda e: (e.at, order[e.action]), reverse=True)


def _name(user: Any) -> str:
    return user.get_username() if user is not None else "system"
