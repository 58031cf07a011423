"""A month's close as finance does it: a checklist computed live, a preparer who submits the
month with a note, and a different person who approves it (which closes the period through
`period_close`) or rejects it; the preparer may withdraw. Reopening stays `period_reopen`
(admin, with a reason).

Closing is a company-wide act: submitting, approving, rejecting and withdrawing need the
finance or admin role and a user who sees every business line. A user scoped to some lines
may read the checklist, restricted to their lines.

The checklist (apps/ledger/services/checklist.py) backs every line with its items; the close
page links each line that is not OK to a page listing exactly them.

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
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.accounts.scopes import finance_act_check
from apps.common.buckets import month_of
from apps.ledger.models import CloseRequest, FindingReview, Period
from apps.ledger.services.accrual import month_window
from apps.ledger.services.checklist import (
    CheckItem,
    Entry,
    UnknownCheck,
    close_check,
    close_checklist,
    decision_label,
    finding_name,
    findings_now,
    reviews_of,
    stale_days,
    user_name,
)
from apps.ledger.services.periods import ALREADY_CLOSED, NOT_ENDED, CloseResult, period_close

# The checklist's names, for the close's callers.
__all__ = [
    "CheckItem",
    "Entry",
    "UnknownCheck",
    "close_check",
    "close_checklist",
    "decision_label",
    "finding_name",
    "stale_days",
]

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


class CloseError(ValueError):
    pass


# --- the workflow --------------------------------------------------------------------------------


def _label(month: date) -> str:
    return f"{month:%Y-%m}"


def detail_shown(item: dict[str, Any]) -> str:
    """A stored checklist line's detail in the active language (as stored at submission), else
    as stored in English (a request submitted before the details were kept in each language)."""
    return str((item.get("details") or {}).get(translation.get_language() or "en", item.get("detail", "")))


def close_request_submit(*, month: date, user: Any, note: str = "", now: datetime | None = None) -> CloseRequest:
    """Submit `month` for closing, with the checklist as it stands now."""
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    month, now = month_of(month), now or timezone.now()
    if month_window(month).end > now:
        raise CloseError(_(NOT_ENDED).format(month=_label(month)))
    if Period.objects.filter(month=month, status=Period.Status.CLOSED).exists():
        raise CloseError(_(ALREADY_CLOSED).format(month=_label(month)))
    with translation.override("en"):  # stored as the msgids: each reader translates
        items = close_checklist(month=month, now=now)
        checklist = [item.as_json() for item in items]
    # A line's detail is a sentence with its figures in it: stored as each language says it.
    for code, _name in settings.LANGUAGES:
        if code != "en":
            with translation.override(code):
                said = {item.key: item.detail for item in close_checklist(month=month, now=now)}
            for stored in checklist:
                stored.setdefault("details", {})[code] = said.get(stored["key"], stored["detail"])
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
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
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
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    if not note.strip():
        raise CloseError(_(REJECT_NEEDS_NOTE))
    with transaction.atomic():
        request = _waiting(month_of(month))
        if request.prepared_by_id == user.pk:
            raise PermissionDenied(_(OWN_REQUEST))
        return _decide(request, CloseRequest.State.REJECTED, user, note)


def close_request_withdraw(*, month: date, user: Any, note: str = "") -> CloseRequest:
    """The preparer takes their waiting request back."""
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    with transaction.atomic():
        request = _waiting(month_of(month))
        if request.prepared_by_id != user.pk:
            raise PermissionDenied(_(NOT_YOURS))
        return _decide(request, CloseRequest.State.WITHDRAWN, user, note)


def finding_review(*, month: date, kind: str, business_line: str, decision: str, note: str, user: Any) -> FindingReview:
    """Record `user`'s decision on the month's finding (kind, business line): resolved (the
    action it asks for was taken) or accepted as it stands, with a reason. The finding must be
    one of the month's now; a second review of it replaces the first (the audit log keeps both)."""
    finance_act_check(user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
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
        events.append(HistoryEvent(request.submitted_at, "submitted", user_name(request.prepared_by), request.note))
        if request.decided_at is not None:
            events.append(
                HistoryEvent(request.decided_at, request.state, user_name(request.decided_by), request.decision_note)
            )
    period = Period.objects.filter(month=month).first()
    if period is not None:
        for event in period.events.select_related("user"):
            action = "closed" if event.action == event.Action.CLOSE else "reopened"
            events.append(HistoryEvent(event.at, action, user_name(event.user), event.note))
    order = defaultdict(int, {"submitted": 0, "closed": 1, "approved": 2})  # a close and its approval share an instant
    return sorted(events, key=lambda e: (e.at, order[e.action]), reverse=True)
