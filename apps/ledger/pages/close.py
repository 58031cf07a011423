"""The month's close on a page (finance and admin): the checklist, the waiting request, the
actions open to this user and the history; for each checklist line a page of its items (where a
line that is not OK leads), the findings' one with a form to resolve or accept each. Changes are
POSTs to `close-act` and `close-review`, company-wide (refused to users scoped to some lines, who
still read the checklist of their lines)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of, finance_act_check
from apps.common.buckets import month_of, next_month, previous_month, zone_name
from apps.ledger.links import page_link
from apps.ledger.models import CloseRequest, Finding, FindingReview, Period
from apps.ledger.services.accrual import month_window
from apps.ledger.services.closing import (
    COMPANY_ACT,
    NEEDS_FINANCE,
    CloseError,
    UnknownCheck,
    close_check,
    close_checklist,
    close_history,
    close_request_approve,
    close_request_reject,
    close_request_submit,
    close_request_withdraw,
    decision_label,
    detail_shown,
    finding_name,
    finding_review,
)
from apps.ledger.services.periods import PeriodError, parse_month, period_reopen


@require_GET
@login_required
def close_latest(request: HttpRequest) -> HttpResponse:
    """The month to close now: the one before this one."""
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    return redirect("finance-close", month=f"{previous_month(month_of(timezone.now())):%Y-%m}")


@require_GET
@login_required
def close_page(request: HttpRequest, month: str) -> HttpResponse:
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    first = parse_month(month, error=Http404)
    lines = business_lines_of(request.user)
    period = Period.objects.filter(month=first).first()
    closed = period is not None and period.status == Period.Status.CLOSED
    requests = CloseRequest.objects.filter(month=first).select_related("prepared_by", "decided_by")
    waiting = next((r for r in requests if r.state == CloseRequest.State.SUBMITTED), None)
    approved = next((r for r in requests if r.state == CloseRequest.State.APPROVED), None) if closed else None
    company = lines is None
    live = close_checklist(month=first, business_lines=lines)
    context: dict[str, Any] = {
        "month": f"{first:%Y-%m}",
        "previous": f"{previous_month(first):%Y-%m}",
        "next": f"{next_month(first):%Y-%m}",
        "period": period,
        "closed": closed,
        "ended": month_window(first).end <= timezone.now(),
        # The stored checklist names every line: a scoped reader gets the live one of their lines.
        "checklist": _stored(approved.checklist, first) if approved and company else live,
        "live": live,
        "waiting": waiting,
        "approved": approved,
        "history": close_history(month=first),
        "zone": zone_name(),
        "scoped": not company,
        "can_submit": company and waiting is None and not closed,
        "can_decide": company and waiting is not None and waiting.prepared_by_id != request.user.pk,
        "can_withdraw": company and waiting is not None and waiting.prepared_by_id == request.user.pk,
        "can_reopen": company and closed and user_has_role(request.user, "admin"),
        "pack": page_link("month pack", month=f"{first:%Y-%m}") if closed else "",
        # The pages of the apps built on the books, as they registered them (apps.ledger.links).
        "pages": {name: page_link(name) for name in ("finance", "bills")}
        | {"plans": page_link("plans", month=f"{first:%Y-%m}")},
    }
    return render(request, "ledger/close.html", context)


@require_GET
@login_required
def close_items(request: HttpRequest, month: str, key: str) -> HttpResponse:
    """The items of one checklist line, computed now: exactly those the line counts."""
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    first = parse_month(month, error=Http404)
    lines = business_lines_of(request.user)
    try:
        item = close_check(key=key, month=first, business_lines=lines)
    except UnknownCheck as exc:
        raise Http404(str(exc)) from exc
    context: dict[str, Any] = {
        "month": f"{first:%Y-%m}",
        "item": item,
        "zone": zone_name(),
        "can_review": lines is None,
        "decisions": FindingReview.Decision.values,
    }
    return render(request, "ledger/close_items.html", context)


@require_POST
@login_required
def close_review(request: HttpRequest, month: str) -> HttpResponse:
    """Resolve or accept one finding (kind, business_line, decision, note); back to the findings."""
    finance_act_check(request.user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    first = parse_month(month, error=Http404)
    post = request.POST
    try:
        review = finding_review(
            month=first,
            kind=post.get("kind", ""),
            business_line=post.get("business_line", ""),
            decision=post.get("decision", ""),
            note=post.get("note", "")[:2000],
            user=request.user,
        )
    except CloseError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            _("%(finding)s: %(decision)s by %(who)s.")
            % {
                "finding": finding_name(Finding(kind=review.kind, business_line=review.business_line)),
                "decision": decision_label(review.decision),
                "who": request.user.get_username(),
            },
        )
    return redirect("finance-close-items", month=f"{first:%Y-%m}", key="open_findings")


def _stored(checklist: list[dict[str, Any]], month: date) -> list[dict[str, Any]]:
    """A request's stored checklist as the page shows it: the reviews' times as times, and each
    line's items page (its items as they stand now)."""
    label = f"{month:%Y-%m}"
    return [
        {
            **item,
            "detail": detail_shown(item),
            "reviews": [{**r, "at": datetime.fromisoformat(r["at"])} for r in item.get("reviews", [])],
            "link": reverse("finance-close-items", kwargs={"month": label, "key": item["key"]}),
        }
        for item in checklist
    ]


ACTIONS = ("submit", "approve", "reject", "withdraw", "reopen")


@require_POST
@login_required
def close_act(request: HttpRequest, month: str) -> HttpResponse:
    """One step of the close (the form's `action`); errors come back as a message on the page."""
    finance_act_check(request.user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    first = parse_month(month, error=Http404)
    action, note = request.POST.get("action", ""), request.POST.get("note", "")[:2000]
    try:
        done = _act(action, first, request.user, note)
    except (CloseError, PeriodError) as exc:
        messages.error(request, str(exc))
    except PermissionDenied as exc:
        if action == "reopen" or not str(exc):
            raise
        messages.error(request, str(exc))  # one's own request: said on the page, not a bare 403
    else:
        messages.success(request, done)
    return redirect("finance-close", month=f"{first:%Y-%m}")


def _act(action: str, month: date, user: Any, note: str) -> str:
    label = f"{month:%Y-%m}"
    if action == "submit":
        close_request_submit(month=month, user=user, note=note)
        return _("%(month)s is submitted for closing; a different finance user approves it.") % {"month": label}
    if action == "approve":
        result = close_request_approve(month=month, user=user, note=note)[1]
        return _("%(month)s is closed: %(findings)s month-end findings.") % {
            "month": label,
            "findings": len(result.findings),
        }
    if action == "reject":
        close_request_reject(month=month, user=user, note=note)
        return _("The close of %(month)s is rejected; the preparer sees why.") % {"month": label}
    if action == "withdraw":
        close_request_withdraw(month=month, user=user, note=note)
        return _("Your close request for %(month)s is withdrawn.") % {"month": label}
    if action == "reopen":
        period_reopen(month=month, user=user, reason=note)
        return _("%(month)s is open again; the reason is recorded.") % {"month": label}
    raise CloseError(
        _("unknown action %(action)r: one of %(actions)s") % {"action": action, "actions": ", ".join(ACTIONS)}
    )


urlpatterns = [
    path("finance/close/", close_latest, name="finance-close-latest"),
    path("finance/close/<str:month>/", close_page, name="finance-close"),
    path("finance/close/<str:month>/act/", close_act, name="finance-close-act"),
    path("finance/close/<str:month>/review/", close_review, name="finance-close-review"),
    path("finance/close/<str:month>/items/<str:key>/", close_items, name="finance-close-items"),
]
