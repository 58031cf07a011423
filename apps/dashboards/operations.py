"""Read-mostly operations pages reusing the existing services: collectors (keys, last seen,
rejections), budgets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.accounts.models import CollectorKey
from apps.accounts.roles import reader_required, user_has_role
from apps.accounts.scopes import COMPANY_WIDE, business_lines_of, sees_all_lines, sees_money
from apps.common.buckets import BucketError, month_of, parse_month
from apps.ingest.models import Rejection
from apps.ledger.selectors import budget_vs_actual

OPERATORS = ("admin", "engineer")


@reader_required
def collectors(request: HttpRequest) -> HttpResponse:
    if not user_has_role(request.user, *OPERATORS):
        raise PermissionDenied("collectors are for engineers and admins")
    if not sees_all_lines(request.user):  # rejected records of every business line
        raise PermissionDenied(COMPANY_WIDE)
    since = datetime.now(UTC) - timedelta(days=7)
    keys = CollectorKey.objects.annotate(
        rejections_7d=Count("rejections", filter=Q(rejections__received_at__gte=since)),
        last_rejection=Max("rejections__received_at"),
    ).order_by("revoked_at", "name")
    latest = Rejection.objects.select_related("source").order_by("-id")[:50]
    return render(request, "dashboards/collectors.html", {"keys": keys, "rejections": latest})


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
    return render(request, "dashboards/budgets.html", context)
