"""The rules pages: the rule sets with their rules (rules are edited in the admin), a new draft
from the active set, and a set tried against recent records (what would move between
class.reasons; nothing is written)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.roles import reader_required, user_has_role
from apps.accounts.scopes import COMPANY_WIDE, edits_rules, sees_all_lines
from apps.classification.models import RuleSet
from apps.classification.reasons import builtin_chain
from apps.classification.services import ruleset_draft_create, ruleset_try
from apps.ingest.models import Record

RULE_EDITORS = ("admin", "engineer")


@reader_required
def rules(request: HttpRequest) -> HttpResponse:
    sets = RuleSet.objects.prefetch_related("rules").order_by("-version")[:20]
    context = {"rulesets": sets, "can_edit": edits_rules(request.user), "chain": builtin_chain()}
    return render(request, "classification/rules.html", context)


@require_POST
@login_required
def rules_draft(request: HttpRequest) -> HttpResponse:
    if not edits_rules(request.user):
        raise PermissionDenied("rules are edited by engineers and admins who see every business line")
    draft = ruleset_draft_create(user=request.user, name=request.POST.get("name", "")[:200])
    return redirect("rules-try", version=draft.version)


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
    return render(request, "classification/rules_try.html", context)


def recent_start(count: int, end: datetime) -> datetime | None:
    """The time of the `count`-th newest record before `end` (None when there are fewer): read
    newest first along the records' key, so it costs `count` index entries, not a day of rows."""
    skip = max(count, 1) - 1
    newest = Record.objects.filter(ts__lt=end).order_by("-ts").values_list("ts", flat=True)[skip : skip + 1]
    return next(iter(newest), None)
