"""The audit report pages: finance, engineers and admins read them; money only for finance
and admin (engineers see tokens). A user scoped to some business lines sees only their
findings and totals over those. `?download=csv` gives the findings as CSV."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of
from apps.audits.models import KIND_LABELS, AuditReport
from apps.audits.selectors import READERS, report_csv_rows, report_findings, report_for_month, scope_totals
from apps.common.buckets import BucketError, parse_month
from apps.common.replica import replica_view
from apps.common.sheets import CSV_TYPE, rows_csv

MONEY_READERS = ("finance", "admin")


def _allowed(request: HttpRequest) -> bool:
    if not user_has_role(request.user, *READERS):
        raise PermissionDenied("the audit is for the finance, engineer and admin roles")
    return user_has_role(request.user, *MONEY_READERS)


@replica_view
@require_GET
@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    with_money = _allowed(request)
    lines = business_lines_of(request.user)
    reports = list(AuditReport.objects.all())
    if lines is not None:
        for report in reports:
            scope_totals(report=report, findings=report_findings(report=report, business_lines=lines))
    context = {"reports": reports, "with_money": with_money, "scoped": lines is not None}
    return render(request, "audits/list.html", context)


@replica_view
@require_GET
@login_required
def report_page(request: HttpRequest, month: str) -> HttpResponse:
    with_money = _allowed(request)
    try:
        report = report_for_month(month=parse_month(month))
    except BucketError as exc:
        raise Http404(str(exc)) from exc
    if report is None:
        raise Http404(f"no audit of {month} yet: run `manage.py run_audit {month}`")
    lines = business_lines_of(request.user)
    if request.GET.get("download") == "csv":
        return _csv(report, with_money, lines)
    findings = report_findings(report=report, business_lines=lines)
    if lines is not None:
        scope_totals(report=report, findings=findings)
    by_kind = {label: [f for f in findings if f.kind == kind] for kind, label in KIND_LABELS.items()}
    context = {
        "report": report,
        "findings": findings,
        "by_kind": by_kind,
        "with_money": with_money,
        "month": month,
        "scoped": lines is not None,
    }
    return render(request, "audits/report.html", context)


def _csv(report: AuditReport, with_money: bool, lines: list[str] | None) -> HttpResponse:
    columns, rows = report_csv_rows(report=report, with_money=with_money, business_lines=lines)
    response = HttpResponse(rows_csv(columns, rows), content_type=CSV_TYPE)
    response["Content-Disposition"] = f'attachment; filename="audit-{report.month:%Y-%m}.csv"'
    return response
