"""The budgets page (every role): each business line's budget against its actual tokens and
spend this month (or ?month=YYYY-MM); a scoped user sees only its lines, money only a money
reader. Budgets are edited on the plans page (plans.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from apps.accounts.roles import reader_required
from apps.accounts.scopes import business_lines_of, sees_money
from apps.common.buckets import BucketError, month_of, parse_month
from apps.ledger.selectors import budget_vs_actual


@reader_required
def budgets(request: HttpRequest) -> HttpResponse:
    month = month_of(datetime.now(UTC))
    if request.GET.get("month"):
        try:
            month = parse_month(request.GET["month"])
        except BucketError:
            pass
    lines = business_lines_of(request.user)
    rows = [r for r in budget_vs_actual(month=month) if lines is None or r["business_line"] in lines]
    context = {"rows": rows, "month": f"{month:%Y-%m}", "money": sees_money(request.user)}
    return render(request, "ledger/budgets.html", context)


urlpatterns = [path("budgets/", budgets, name="budgets")]
