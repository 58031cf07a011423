"""Read-mostly operations pages reusing the existing services: rules (rule sets, a new draft,
try a set against recent records; rules are edited in the admin), prices and cost pools,
collectors (keys, last seen, rejections), budgets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.models import CollectorKey
from apps.accounts.roles import user_has_role
from apps.accounts.scopes import COMPANY_WIDE, business_lines_of, edits_rules, sees_all_lines, sees_money
from apps.classification.models import RuleSet
from apps.classification.services import ruleset_draft_create, ruleset_try
from apps.common.buckets import BucketError, month_of, parse_month
from apps.dashboards.reasons import builtin_chain
from apps.dashboards.views import reader_required
from apps.ingest.models import Rejection
from apps.ledger.selectors import budget_vs_actual
from apps.pricing.models import CostPool, PriceVersion
from apps.pricing.selectors import unpriced_models_recent

RULE_EDITORS = ("admin", "engineer")
OPERATORS = ("admin", "engineer")


@reader_required
def rules(request: HttpRequest) -> HttpResponse:
    sets = RuleSet.objects.prefetch_related("rules").order_by("-version")[:20]
    context = {"rulesets": sets, "can_edit": edits_rules(request.user), "chain": builtin_chain()}
    return render(request, "dashboards/rules.html", context)


@require_POST
@login_required
def rules_draft(request: HttpRequest) -> HttpResponse:
    if not edits_rules(request.user):
        raise PermissionDenied("rules are edited by engineers and admins who see every business line")
    draft = ruleset_draft_create(user=request.user, name=request.POST.get("name", "")[:200])
    return redirect("dashboards:rules-try", version=draft.version)


@reader_required
def rules_try(request: HttpRequest, version: int) -> HttpResponse:
    if not user_has_role(request.user, *RULE_EDITORS):
        raise PermissionDenied("trying rules is for engineers and admins")
    if not sees_all_lines(request.user):  # totals over every business line
        raise PermissionDenied(COMPANY_WIDE)
    ruleset = get_object_or_404(RuleSet.objects.prefetch_related("rules"), version=version)
    end = datetime.now(UTC)
    hours = int(request.GET["hours"]) if request.GET.get("hours", "").isdigit() else None
    few = False
    if hours is None:  # by default the newest records, a page's worth of work at any volume
        newest = recent_start(settings.RULES_TRY_RECORDS, end)
        few = newest is None
        start = newest or end - timedelta(hours=24)
    else:
        start = end - timedelta(hours=min(max(hours, 1), 24 * 31))
    moves = ruleset_try(ruleset=ruleset, start=start, end=end)
    context = {
        "ruleset": ruleset,
        "moves": moves,
        "hours": hours,
        "start": start,
        "records": settings.RULES_TRY_RECORDS,
        "few": few,
    }
    return render(request, "dashboards/rules_try.html", context)


def recent_start(count: int, end: datetime) -> datetime | None:
    """The time of the `count`-th newest record before `end` (None when there are fewer): read
    newest first along the records' key, so it costs `count` index entries, not a day of rows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ts FROM ingest_record WHERE ts < %s ORDER BY ts DESC OFFSET %s LIMIT 1", [end, max(count, 1) - 1]
        )
        row = cursor.fetchone()
    return row[0] if row else None


@reader_required
def prices(request: HttpRequest) -> HttpResponse:
    money = sees_money(request.user)
    context = {
        "money": money,
        "versions": PriceVersion.objects.prefetch_related("prices")[:20] if money else [],
        "pools": CostPool.objects.all() if money else [],
        "unpriced": unpriced_models_recent(),
    }
    return render(request, "dashboards/prices.html", context)


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
