"""The collectors page (engineers and admins who see every business line): each collector key
with its limits, when it was last seen and its rejections, and the latest rejected records.
It reads the keys (accounts) and the records refused at the door (ingest's rejections), so it
lives in ingest, the lowest app that may read both: accounts imports no app above it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.accounts.models import CollectorKey
from apps.accounts.roles import reader_required, user_has_role
from apps.accounts.scopes import COMPANY_WIDE, sees_all_lines
from apps.ingest.models import Rejection

OPERATORS = ("admin", "engineer")
LATEST_REJECTIONS = 50
# The contract's words for what is wrong with a record (apps/ingest/contract.py, the API answers
# them as they are), said in the reader's language on the page; one it does not know as it is.
SAID = [
    (re.compile(r"Object missing required field `[^`]+`"), gettext_noop("missing")),
    (re.compile(r"Object contains unknown field `[^`]+`"), gettext_noop("not a field of the contract")),
    (re.compile(r"Expected `int` >= (?P<n>\d+)"), gettext_noop("must be a whole number of at least %(n)s")),
    (re.compile(r"Expected `(?P<type>\w+)`, got `(?P<got>\w+)`"), gettext_noop("must be %(type)s, not %(got)s")),
    (re.compile(r"must be within the last (?P<days>\d+) days"), gettext_noop("must be within the last %(days)s days")),
]
# The contract's fixed messages, translated as they are.
FIXED = (
    gettext_noop("must be <= tokens.prompt (prompt includes cached tokens)"),
    gettext_noop("tokens.system + tokens.tool must be <= tokens.prompt"),
    gettext_noop("must be <= tokens.completion"),
    gettext_noop("tokens.structural + tokens.reasoning must be <= tokens.completion"),
    gettext_noop(
        "tokens.prompt_cached + tokens.prompt_cache_write must be <= tokens.prompt "
        "(prompt includes cache reads and writes)"
    ),
    gettext_noop("must be <= tokens.draft"),
    gettext_noop("must be at most 24 h in the future"),
)


def reasons_in_words(errors: Any) -> list[tuple[str, str]]:
    """A rejection's errors ({field: [message, ...]}) as (field, what is wrong with it) in the
    reader's language."""
    if not isinstance(errors, dict):
        return [("", str(errors))]
    said = []
    for field, messages in errors.items():
        for message in messages if isinstance(messages, list) else [messages]:
            text = str(message)
            for pattern, words in SAID:
                if found := pattern.fullmatch(text):
                    text = _(words) % found.groupdict()
                    break
            else:
                text = _(text) if text in FIXED else text
            said.append((field, text))
    return said


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
    latest = list(Rejection.objects.select_related("source").order_by("-id")[:LATEST_REJECTIONS])
    for rejection in latest:
        rejection.reasons = reasons_in_words(rejection.errors)  # type: ignore[attr-defined]
    return render(request, "ingest/collectors.html", {"keys": keys, "rejections": latest})
