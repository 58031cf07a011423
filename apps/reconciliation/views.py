"""The bill reconciliation page (finance and admin): each supplier's month against the
platform, the differences with their figures, refused import rows, and the adjusting entries
proposed and posted; `?download=<table>&format=csv|xlsx` gives a table as a spreadsheet.

Uploading a bill and proposing or deciding adjustments are POSTs to `finance-reconciliation-act`,
company-wide like the close: a user scoped to some lines reads the differences of their cost
centres only."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.scopes import business_lines_of, finance_act_check
from apps.common.buckets import month_of, next_month, previous_month
from apps.common.sheets import table_download
from apps.ledger.links import page_link
from apps.ledger.models import Period
from apps.ledger.services.periods import parse_month
from apps.reconciliation.adjustments import (
    COMPANY_ACT,
    NEEDS_FINANCE,
    AdjustmentError,
    adjustment_approve,
    adjustment_propose,
    adjustment_reject,
    open_month_from,
)
from apps.reconciliation.imports import BillImportError, bill_import
from apps.reconciliation.models import Supplier
from apps.reconciliation.tables import reconciliation_build

MAX_BILL_BYTES = 20 * 1024 * 1024


def _month(request: HttpRequest) -> date:
    raw = request.GET.get("month")
    return parse_month(raw, error=Http404) if raw else previous_month(month_of(timezone.now()))


@require_GET
@login_required
def reconciliation_page(request: HttpRequest) -> HttpResponse:
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    month = _month(request)
    lines = business_lines_of(request.user)
    board = reconciliation_build(month=month, business_lines=lines)
    name = request.GET.get("download")
    if name:
        table = board.table(name)
        if table is None:
            raise Http404(f"no table {name!r}")
        return table_download(
            table, fmt=request.GET.get("format", "csv"), filename=f"reconciliation-{name}-{month:%Y-%m}"
        )
    label = f"{month:%Y-%m}"
    context: dict[str, Any] = {
        "board": board,
        "month": label,
        "previous": f"{previous_month(month):%Y-%m}",
        "next": f"{next_month(month):%Y-%m}",
        "closed": Period.objects.filter(month=month, status=Period.Status.CLOSED).exists(),
        "company": lines is None,
        "suppliers": Supplier.objects.filter(active=True),
        "open_keys": [(r.supplier, d) for r in board.reconciliations for d in r.open if lines is None],
        "user_id": request.user.pk,
        "pages": {name: page_link(name) for name in ("finance", "journal")},
    }
    return render(request, "reconciliation/reconciliation.html", context)


@require_POST
@login_required
def reconciliation_act(request: HttpRequest) -> HttpResponse:
    """Upload a bill, propose, approve or reject an adjustment (the form's `action`); errors
    come back as a message on the page."""
    finance_act_check(request.user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    month = parse_month(request.POST.get("month", ""), error=Http404)
    try:
        done = _act(request, month)
    except (BillImportError, AdjustmentError) as exc:
        messages.error(request, str(exc))
    except PermissionDenied as exc:
        if not str(exc):
            raise
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return redirect(f"{reverse('finance-reconciliation')}?month={month:%Y-%m}")


def _supplier(request: HttpRequest) -> Supplier:
    found = Supplier.objects.select_related("pool").filter(pk=request.POST.get("supplier") or 0).first()
    if found is None:
        raise AdjustmentError(_("choose a supplier"))
    return found


def _act(request: HttpRequest, month: date) -> str:
    action, note = request.POST.get("action", ""), request.POST.get("note", "")[:2000]
    label = f"{month:%Y-%m}"
    if action == "import":
        return _import(request, month)
    if action == "propose":
        day = parse_date(request.POST.get("day", "")) if request.POST.get("day") else None
        model, key = request.POST.get("model") or None, request.POST.get("key", "")
        adjustment_propose(
            supplier=_supplier(request), month=month, user=request.user, day=day, model=model, key=key, note=note
        )
        return _("The adjustment for %(month)s is proposed; a different finance user approves it.") % {"month": label}
    adjustment_id = int(request.POST.get("adjustment", "0") or 0)
    if action == "approve":
        adjustment = adjustment_approve(adjustment_id=adjustment_id, user=request.user, note=note)
        assert adjustment.entry is not None
        return _("The adjustment is posted in %(period)s.") % {"period": f"{adjustment.entry.period_id:%Y-%m}"}
    if action == "reject":
        adjustment_reject(adjustment_id=adjustment_id, user=request.user, note=note)
        return _("The adjustment is rejected; the proposer sees why.")
    raise AdjustmentError(_("unknown action %(action)r") % {"action": action})


def _import(request: HttpRequest, month: date) -> str:
    upload = request.FILES.get("file")
    if upload is None:
        raise BillImportError(_("choose the bill's CSV file"))
    if upload.size is not None and upload.size > MAX_BILL_BYTES:
        raise BillImportError(_("the file is larger than 20 MB"))
    result = bill_import(
        supplier=_supplier(request), month=month, content=upload.read(), filename=upload.name or "", user=request.user
    )
    if not result.accepted:
        raise BillImportError(
            _("The bill is refused: %(count)s bad rows, listed below with their reasons; nothing was imported.")
            % {"count": result.refused_rows}
        )
    done = _("%(rows)s rows imported (%(total)s %(currency)s).") % {
        "rows": result.bill.rows,
        "total": result.bill.total,
        "currency": result.bill.currency,
    }
    if Period.objects.filter(month=month, status=Period.Status.CLOSED).exists():
        done += " " + _late_bill(result.bill.supplier, month, request.user)
    return done


def _late_bill(supplier: Supplier, month: date, user: Any) -> str:
    """A bill of a closed month: its open differences proposed at once as one adjustment, which
    a second finance user's approval posts into the first open month."""
    where = {"month": f"{month:%Y-%m}", "open": f"{open_month_from(month):%Y-%m}"}
    try:
        adjustment_propose(supplier=supplier, month=month, user=user, note=_("Bill imported after the close."))
    except AdjustmentError as exc:  # nothing open, or a proposal already waits
        return _("%(month)s is closed: %(why)s.") % {**where, "why": str(exc)}
    return (
        _(
            "%(month)s is closed: the adjustment explaining the bill's differences is proposed; once a "
            "different finance user approves it, it is posted in %(open)s."
        )
        % where
    )


urlpatterns = [
    path("finance/reconciliation/", reconciliation_page, name="finance-reconciliation"),
    path("finance/reconciliation/act/", reconciliation_act, name="finance-reconciliation-act"),
]
