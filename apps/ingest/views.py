"""The collectors page (engineers and admins who see every business line): each collector key
with its limits, when it was last seen and its rejections, and the latest rejected records.
It reads the keys (accounts) and the records refused at the door (ingest's rejections), so it
lives in ingest, the lowest app that may read both: accounts imports no app above it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.accounts.models import CollectorKey
from apps.accounts.roles import reader_required, user_has_role
from apps.accounts.scopes import COMPANY_WIDE, sees_all_lines
from apps.ingest.models import Rejection

OPERATORS = ("admin", "engineer")
LATEST_REJECTIONS = 50


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
    latest = Rejection.objects.select_related("source").order_by("-id")[:LATEST_REJECTIONS]
    return render(request, "ingest/collectors.html", {"keys": keys, "rejections": latest})
