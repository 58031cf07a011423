"""The finance dashboard page (finance and admin) and plotly.js, served from the installed
plotly package (no CDN)."""

from __future__ import annotations

import csv
from datetime import date
from functools import cache

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of
from apps.common.buckets import month_of
from apps.common.csvcells import safe_row
from apps.ledger.dashboard import dashboard_build
from apps.ledger.services.periods import PeriodError, parse_month


def _month(request: HttpRequest) -> date:
    raw = request.GET.get("month")
    if not raw:
        return month_of(timezone.now())
    try:
        return parse_month(raw)
    except PeriodError as exc:
        raise Http404(str(exc)) from exc


@require_GET
@login_required
def finance_dashboard(request: HttpRequest) -> HttpResponse:
    """Spend by account and cost centre, budget vs actual, trend, period status, findings, only
    of the user's business lines (cost centres); `?download=<table>` gives any table as CSV."""
    if not user_has_role(request.user, "finance", "admin"):
        raise PermissionDenied("the finance dashboard is for the finance and admin roles")
    board = dashboard_build(
        month=_month(request), currency=request.GET.get("currency"), business_lines=business_lines_of(request.user)
    )
    name = request.GET.get("download")
    if name:
        table = board.table(name)
        if table is None:
            raise Http404(f"no table {name!r}")
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="finance-{table.name}-{board.month:%Y-%m}.csv"'
        writer = csv.writer(response, lineterminator="\n")
        writer.writerow(table.columns)
        writer.writerows(safe_row("" if v is None else v for v in cells) for cells in table.cells())
        return response
    return render(request, "ledger/finance.html", {"board": board, "month": f"{board.month:%Y-%m}"})


@cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


@require_GET
def plotly_js(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(_plotly_js(), content_type="application/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=86400"
    return response


urlpatterns = [
    path("finance/", finance_dashboard, name="finance"),
    path("finance/plotly.min.js", plotly_js, name="plotly-js"),
]
