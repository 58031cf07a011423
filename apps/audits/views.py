"""The audit report pages: finance, engineers and admins read them; money only for finance
and admin (engineers see tokens). `?download=csv` gives the findings as CSV."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts.roles import user_has_role
from apps.audits.models import KIND_LABELS, AuditReport
from apps.audits.selectors import report_csv_rows, report_findings, report_for_month
from apps.ledger.services.periods import PeriodError, parse_month

READERS = ("finance", "engineer", "admin")
MONEY_READERS = ("finance", "admin")


def _allowed(request: HttpRequest) -> bool:
    if not user_has_role(request.user, *READERS):
        raise PermissionDenied("the audit is for the finance, engineer and admin roles")
    return user_has_role(request.user, *MONEY_READERS)


@require_GET
@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    with_money = _allowed(request)
    return render(request, "audits/list.html", {"reports": AuditReport.objects.all(), "with_money": with_money})


@require_GET
@login_required
def report_page(request: HttpRequest, month: str) -> HttpResponse:
    with_money = _allowed(request)
    try:
        report = report_for_month(month=parse_month(month))
    except PeriodError as exc:
        raise Http404(str(exc)) from exc
    if report is None:
        raise Http404(f"no audit of {month} yet: run `manage.py run_audit {month}`")
    if request.GET.get("download") == "csv":
        return _csv(report, with_money)
    findings = report_findings(report=report)
    by_kind = {label: [f for f in findings if f.kind == kind] for kind, label in KIND_LABELS.items()}
    context = {"report": report, "findings": findings, "by_kind": by_kind, "with_money": with_money, "month": month}
    return render(request, "audits/report.html", context)


def _csv(report: AuditReport, with_money: bool) -> HttpResponse:
    columns, rows = report_csv_rows(report=report, with_money=with_money)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{report.month:%Y-%m}.csv"'
    writer = csv.writer(response, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return response
