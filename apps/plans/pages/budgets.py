"""The budgets page (every role): each business line's budget against its spend and tokens
this month (or ?month=YYYY-MM), pro-rated to the month's days gone, with the variance and the
forecast (apps/plans/budget_reading.py); a scoped user sees only its lines, money only a money
reader. Budgets are edited on the plans page (plans.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from apps.accounts.roles import reader_required
from apps.accounts.scopes import business_lines_of, sees_money
from apps.common.buckets import BucketError, accounting_zone, month_of, parse_month
from apps.plans.budget_reading import budget_reading


@reader_required
def budgets(request: HttpRequest) -> HttpResponse:
    now = datetime.now(UTC)
    month = month_of(now)
    if request.GET.get("month"):
        try:
            month = parse_month(request.GET["month"])
        except BucketError:
            pass
    reading = budget_reading(month=month, now=now, business_lines=business_lines_of(request.user))
    context = {
        "reading": reading,
        "month": f"{month:%Y-%m}",
        "money": sees_money(request.user),
        "zone": accounting_zone().key,
    }
    return render(request, "plans/budgets.html", context)


urlpatterns = [path("budgets/", budgets, name="budgets")]
