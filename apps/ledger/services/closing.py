"""A month's close as finance does it: a checklist computed live, a preparer who submits the
month with a note, and a different person who approves it (which closes the period through
`period_close`) or rejects it; the preparer may withdraw. Reopening stays `period_reopen`
(admin, with a reason).

Closing is a company-wide act: submitting, approving, rejecting and withdrawing need the
finance or admin role and a user who sees every business line. A user scoped to some lines
may read the checklist, restricted to their lines.

Every line of the checklist is backed by its items (`CheckItem.items`): the unpriced models,
the days, the findings, the suppliers... The close page links each line that is not OK to a page
listing exactly those items (`close_check` computes one line), each leading to where it is fixed.

Each month-end finding is resolved, or accepted with a reason, by a named person before the
month can be submitted (`finding_review`): a finding is known by its key (month, kind, business
line), computed live before the close and stored by it, so a review stands for the key either
way and the close keeps it. Approval refuses a close whose checks find a finding nobody reviewed
(one that appeared since the request was submitted): the request keeps waiting.

The checklist of a request is stored as it stood when submitted, in English (the msgids), as
a list of {"key", "label", "value", "ok", "detail"} (the findings' line also with "reviews");
pages translate the labels.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, pgettext

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of
from apps.classification.models import DirtyDay as ClassDirtyDay
from apps.classification.models import HourlyClass
from apps.common.buckets import day_of, month_days, month_of, next_month, zone_name
from apps.ingest.models import DimSet, ServedModel
from apps.ledger import conf
from apps.ledger.finance.links import month_waste_href
from apps.ledger.mapping import mapping_load
from apps.ledger.models import (
    Account,
    AccrualDay,
    Budget,
    CloseRequest,
    DirtyDay,
    Finding,
    FindingReview,
    JournalLine,
    Period,
)
from apps.ledger.reconciliation.matching import month_reconcile
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
FINDINGS_OPEN = gettext_noop(
    "{count} month-end findings of {month} are neither resolved nor accepted: each needs a named "
    "person's decision before the month is submitted"
)
FINDINGS_NEW = gettext_noop(
    "the close of {month} finds {count} findings nobody resolved or accepted (they appeared since the "
    "request was submitted): review them, then approve"
)
NO_SUCH_FINDING = gettext_noop("{month} has no finding {kind} for {line}")
ACCEPT_NEEDS_REASON = gettext_noop("say why the finding is accepted as it stands (it is recorded)")
UNKNOWN_DECISION = gettext_noop("a finding is either resolved or accepted")
UNKNOWN_CHECK = gettext_noop("the checklist has no line {key}")


class CloseError(ValueError):
    pass


# --- the checklist -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One item behind a checklist line, as the line's page lists it: what it is, its figure and
    where it is acted on. A finding's entry carries the finding and its review (if any)."""

    name: str
    figure: str = ""
    link: str = ""
    tokens: int = 0
    finding: Finding | None = None
    review: FindingReview | None = None


@dataclass(frozen=True)
class CheckItem:
    key: str
    label: str  # an English msgid; pages translate it
    value: str | int
    ok: bool
    detail: str
    link: str = ""  # the page of its items
    items: tuple[Entry, ...] = ()  # what is not OK: as many as `value` counts (unattributed: its tokens)
    settled: tuple[Entry, ...] = ()  # findings: those resolved or accepted

    @property
    def reviews(self) -> list[dict[str, Any]]:
        """The findings' reviews: who resolved or accepted which, when and why (the label an
        English msgid)."""
        return [_review(e) for e in (*self.items, *self.settled) if e.review is not None]

    def as_json(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "key": self.key,
            "label": self.label,
            "value": self.value,
            "ok": self.ok,
            "detail": self.detail,
        }
        if self.key == "open_findings":
            stored["reviews"] = [{**r, "at": r["at"].isoformat()} for r in self.reviews]
        return stored


def _review(entry: Entry) -> dict[str, Any]:
    review, finding = entry.review, entry.finding
    assert review is not None and finding is not None
    return {
        "kind": finding.kind,
        "label": FINDING_NAMES[Finding.Kind(finding.kind)],
        "business_line": finding.business_line,
        "decision": review.decision,
        "by": _name(review.reviewed_by),
        "at": review.reviewed_at,
        "note": review.note,
    }


def close_checklist(
    *, month: date, business_lines: list[str] | None = None, now: datetime | None = None
) -> list[CheckItem]:
    """What stands between `month` and a clean close, computed now. Items naming business
    lines (findings, budgets) hold only `business_lines` unless it is None; the others are
    company-wide counts that name no line."""
    return [close_check(key=key, month=month, business_lines=business_lines, now=now) for key in CHECKS]


def close_check(
    *, key: str, month: date, business_lines: list[str] | None = None, now: datetime | None = None
) -> CheckItem:
    """One line of the checklist, with its items; CloseError for a key the checklist lacks."""
    check = CHECKS.get(key)
    if check is None:
        raise CloseError(_(UNKNOWN_CHECK).format(key=key))
    found = check(month_of(month), business_lines, now or timezone.now())
    return replace(found, link=reverse("finance-close-items", kwargs={"month": f"{month_of(month):%Y-%m}", "key": key}))


def _unpriced(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
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
    items = tuple(Entry(m.model, f"{m.tokens:,}", reverse("prices"), m.tokens) for m in models)
    return CheckItem("unpriced_models", gettext_noop("Unpriced models"), len(models), not tokens, detail, items=items)


def _missing_rates(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    missing = missing_rates(start=month, end=next_month(month))
    shown = [f"{m.day} {m.currency}/{m.to} ({m.amount.quantize(Decimal('0.01'))} {m.currency})" for m in missing]
    listed = ", ".join(shown[:15]) + (" …" if len(missing) > 15 else "")
    detail = (
        _(
            "Days with costs priced in another currency and no rate into the functional one: %(days)s. "
            "They are not booked (not booked as 0) until the rate is entered."
        )
        % {"days": listed}
        if missing
        else _("Every day's costs in other currencies have their day's rate.")
    )
    items = tuple(
        Entry(
            f"{m.day} {m.currency}/{m.to}",
            f"{m.amount.quantize(Decimal('0.01'))} {m.currency}",
            reverse("finance-rates"),
        )
        for m in missing
    )
    return CheckItem(
        "missing_rates", gettext_noop("Missing exchange rates"), len(missing), not missing, detail, items=items
    )


def _unattributed(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    """The share of the month's tokens without a business line; its items are the models they
    were served by, each with its tokens without a line."""
    window = month_window(month)
    with analytic_cursor() as cursor:
        cursor.execute(
            "SELECT m.name, COALESCE(SUM(h.tokens) FILTER (WHERE d.business_line = ''), 0), COALESCE(SUM(h.tokens), 0) "
            f"FROM {HourlyClass._meta.db_table} h JOIN {DimSet._meta.db_table} d ON d.id = h.dims_id "
            f"JOIN {ServedModel._meta.db_table} m ON m.id = h.model_id "
            "WHERE h.hour >= %s AND h.hour < %s GROUP BY m.name ORDER BY 2 DESC, m.name",
            [window.start, window.end],
        )
        rows = cursor.fetchall()
    unassigned, total = sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows)
    share = Decimal(unassigned) / Decimal(total) if total else Decimal(0)
    money = _unassigned_money(month)
    spent = "; ".join(f"{amount:,} {currency}" for currency, amount in sorted(money.items()) if amount)
    detail = (
        _("%(tokens)s of %(total)s tokens carry no business line (booked to the cost centre “%(cc)s”: %(money)s).")
        % {"tokens": f"{unassigned:,}", "total": f"{total:,}", "cc": conf.get("LEDGER_UNASSIGNED"), "money": spent or 0}
        if unassigned
        else _("Every token of the month carries a business line.")
    )
    items = tuple(
        Entry(name, f"{int(tokens):,}", month_waste_href(month=month, business_line="", model=name), int(tokens))
        for name, tokens, _all in rows
        if tokens
    )
    value = f"{(share * 100).quantize(Decimal('0.1'))} %"
    return CheckItem("unattributed", gettext_noop("Unattributed share"), value, not unassigned, detail, items=items)


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


def _not_accrued(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
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
    journal = reverse("finance-journal")
    items = tuple(Entry(f"{d:%Y-%m-%d}", _("to book"), f"{journal}?month={month:%Y-%m}&day={d:%Y-%m-%d}") for d in days)
    return CheckItem("days_not_accrued", gettext_noop("Days not yet accrued"), len(days), not days, detail, items=items)


def _dirty(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    window = month_window(month)
    days = month_days(month)
    # A day is a date in the zone it was marked in: one day either side may belong to this month.
    near = (days[0] - timedelta(days=1), days[-1] + timedelta(days=1))
    ledger = sorted(set(DirtyDay.objects.filter(day__gte=near[0], day__lte=near[1]).values_list("day", flat=True)))
    hours = sorted(
        set(DirtyHour.objects.filter(hour__gte=window.start, hour__lt=window.end).values_list("hour", flat=True))
    )
    classes = sorted(ClassDirtyDay.objects.filter(day__gte=near[0], day__lte=near[1]).values_list("day", flat=True))
    total = len(ledger) + len(hours) + len(classes)
    detail = (
        _(
            "Waiting to be processed: %(ledger)s days to re-book, %(hours)s hours to re-price, %(classes)s days to "
            "re-classify. The jobs pick them up within minutes; the books may still change."
        )
        % {"ledger": len(ledger), "hours": len(hours), "classes": len(classes)}
        if total
        else _("No day of the month waits for re-classification, re-pricing or re-booking.")
    )
    zone, prices = ZoneInfo(zone_name()), reverse("prices")
    items = (
        *(Entry(f"{d:%Y-%m-%d}", _("to re-book"), prices) for d in ledger),
        *(Entry(f"{h.astimezone(zone):%Y-%m-%d %H:%M}", _("to re-price"), prices) for h in hours),
        *(Entry(f"{d:%Y-%m-%d}", _("to re-classify"), prices) for d in classes),
    )
    return CheckItem("dirty_days", gettext_noop("Dirty days"), total, not total, detail, items=items)


FINDING_NAMES = {
    Finding.Kind.EFFECTIVE_SHARE_LOW: gettext_noop("effective share low"),
    Finding.Kind.ELASTIC_OVER_REVENUE: gettext_noop("elastic spend over revenue"),
    Finding.Kind.REVENUE_MISSING: gettext_noop("revenue missing"),
    Finding.Kind.STRUCTURAL_ZERO: gettext_noop("no structural spend"),
    Finding.Kind.BILL_UNRECONCILED: gettext_noop("supplier bill not reconciled"),
}


def decision_label(decision: str) -> str:
    """A review's decision in the reader's language ("resolved" is a finding's word here, not an
    alert's)."""
    if decision == FindingReview.Decision.RESOLVED:
        return pgettext("finding", "resolved")
    return pgettext("finding", "accepted")


def findings_now(*, month: date) -> list[Finding]:
    """The month's findings: those stored at its close once it is closed, else what the
    month-end checks find now (unsaved)."""
    month = month_of(month)
    if Period.objects.filter(month=month, status=Period.Status.CLOSED).exists():
        return list(Finding.objects.filter(period=month).order_by("kind", "business_line"))
    return month_findings(month=month)


def reviews_of(*, month: date) -> dict[tuple[str, str], FindingReview]:
    """The month's reviews by their finding's (kind, business line)."""
    found = FindingReview.objects.filter(period=month_of(month)).select_related("reviewed_by")
    return {(r.kind, r.business_line): r for r in found}


def finding_name(finding: Finding) -> str:
    return f"{_(FINDING_NAMES[Finding.Kind(finding.kind)])}: {finding.business_line or _('the company')}"


def _finding_link(finding: Finding) -> str:
    """Where the finding's action is taken."""
    month, line = finding.period, finding.business_line
    if finding.kind in (Finding.Kind.ELASTIC_OVER_REVENUE, Finding.Kind.REVENUE_MISSING):
        return reverse("finance-plans", kwargs={"month": f"{month:%Y-%m}"})
    if finding.kind == Finding.Kind.BILL_UNRECONCILED:
        return f"{reverse('finance-reconciliation')}?month={month:%Y-%m}"
    if finding.kind == Finding.Kind.STRUCTURAL_ZERO:
        return f"{reverse('finance-journal')}?month={month:%Y-%m}&cost_centre={line}&side=expense"
    return month_waste_href(month=month, business_line=line)


def _findings(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    """Open: a finding of the month (live before the close, stored after it) that no named
    person has resolved or accepted yet."""
    found = findings_now(month=month)
    if business_lines is not None:
        found = [f for f in found if f.business_line in business_lines]
    reviews = reviews_of(month=month)
    entries = [
        Entry(finding_name(f), f.message, _finding_link(f), finding=f, review=reviews.get((f.kind, f.business_line)))
        for f in found
    ]
    open_ = tuple(e for e in entries if e.review is None)
    settled = tuple(e for e in entries if e.review is not None)
    if open_:
        detail = _(
            "Month-end checks: %(findings)s. Each is resolved, or accepted with a reason, by a named person "
            "before the month is submitted."
        ) % {"findings": "; ".join(e.name for e in open_[:10])}
    elif settled:
        detail = _("%(count)s month-end findings, each resolved or accepted: %(findings)s.") % {
            "count": len(settled),
            "findings": "; ".join(f"{e.name} ({_settled(e)})" for e in settled[:10]),
        }
    else:
        detail = _("The month-end checks find nothing to act on.")
    return CheckItem(
        "open_findings", gettext_noop("Open findings"), len(open_), not open_, detail, items=open_, settled=settled
    )


def _settled(entry: Entry) -> str:
    assert entry.review is not None
    return _("%(decision)s by %(who)s") % {
        "decision": decision_label(entry.review.decision),
        "who": _name(entry.review.reviewed_by),
    }


def _budgets_unspent(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    budgets = Budget.objects.of_lines().filter(month=month)
    if business_lines is not None:
        budgets = budgets.filter(business_line__in=business_lines)
    booked = set(
        JournalLine.objects.filter(day__gte=month, day__lt=next_month(month), account__kind=Account.Kind.EXPENSE)
        .exclude(debit=0, credit=0, tokens=0)
        .values_list("cost_centre", flat=True)
        .distinct()
    )
    unspent = sorted((b for b in budgets if b.business_line not in booked), key=lambda b: b.business_line)
    lines = [b.business_line for b in unspent]
    detail = (
        _("Budgeted but nothing booked: %(lines)s. A wrong business line in the budget, or records missing?")
        % {"lines": ", ".join(lines[:10])}
        if lines
        else _("Every budgeted business line has booked spend.")
    )
    plans = reverse("finance-plans", kwargs={"month": f"{month:%Y-%m}"})
    items = tuple(Entry(b.business_line, f"{b.amount} {b.currency}", plans) for b in unspent)
    return CheckItem(
        "budgets_unspent", gettext_noop("Budgets without actuals"), len(lines), not lines, detail, items=items
    )


def _supplier_bills(month: date, business_lines: list[str] | None, now: datetime) -> CheckItem:
    """Each active supplier's month against its bill (apps/ledger/reconciliation): one not
    reconciled has no bill yet or differences no posted adjustment explains."""
    found = month_reconcile(month=month)
    loose = [r for r in found if not r.reconciled]
    page = f"{reverse('finance-reconciliation')}?month={month:%Y-%m}"
    items = tuple(
        Entry(
            r.supplier.name,
            _("no bill imported")
            if r.bill is None
            else _("%(count)s open differences, %(amount)s %(currency)s unexplained")
            % {"count": len(r.open), "amount": r.unreconciled, "currency": r.supplier.currency},
            page,
        )
        for r in loose
    )
    if loose:
        detail = _("Bills not reconciled: %(suppliers)s.") % {
            "suppliers": "; ".join(f"{e.name} ({e.figure})" for e in items[:10])
        }
    elif found:
        detail = _("Every supplier's bill of the month is imported and reconciled.")
    else:
        detail = _("No supplier is set up: there is no bill to reconcile.")
    label = gettext_noop("Supplier bills not reconciled")
    return CheckItem("supplier_bills", label, len(loose), not loose, detail, items=items)


Check = Callable[[date, "list[str] | None", datetime], CheckItem]
CHECKS: dict[str, Check] = {
    "unpriced_models": _unpriced,
    "unattributed": _unattributed,
    "days_not_accrued": _not_accrued,
    "dirty_days": _dirty,
    "open_findings": _findings,
    "budgets_unspent": _budgets_unspent,
    "missing_rates": _missing_rates,
    "supplier_bills": _supplier_bills,
}


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
        items = close_checklist(month=month, now=now)
        checklist = [item.as_json() for item in items]
    unreviewed = next(item for item in items if item.key == "open_findings").value
    if unreviewed:
        raise CloseError(_(FINDINGS_OPEN).format(count=unreviewed, month=_label(month)))
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
        reviewed = reviews_of(month=month)
        unreviewed = [f for f in result.findings if (f.kind, f.business_line) not in reviewed]
        if unreviewed:  # raised inside the transaction: the close is rolled back, the request waits
            raise CloseError(_(FINDINGS_NEW).format(count=len(unreviewed), month=_label(month)))
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


def finding_review(*, month: date, kind: str, business_line: str, decision: str, note: str, user: Any) -> FindingReview:
    """Record `user`'s decision on the month's finding (kind, business line): resolved (the
    action it asks for was taken) or accepted as it stands, with a reason. The finding must be
    one of the month's now; a second review of it replaces the first (the audit log keeps both)."""
    _closer_check(user)
    month, note = month_of(month), note.strip()
    if decision not in FindingReview.Decision.values:
        raise CloseError(_(UNKNOWN_DECISION))
    if decision == FindingReview.Decision.ACCEPTED and not note:
        raise CloseError(_(ACCEPT_NEEDS_REASON))
    key = (kind, business_line)
    finding = next((f for f in findings_now(month=month) if (f.kind, f.business_line) == key), None)
    if finding is None:
        line = business_line or _("the company")
        raise CloseError(_(NO_SUCH_FINDING).format(month=_label(month), kind=kind, line=line))
    with transaction.atomic():
        review = FindingReview.objects.select_for_update().filter(period=month, kind=kind, business_line=business_line)
        found = review.first() or FindingReview(period=month, kind=kind, business_line=business_line)
        found.decision, found.note, found.figures, found.reviewed_by = decision, note, finding.figures, user
        found.reviewed_at = timezone.now()
        found.save()
        return found


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
