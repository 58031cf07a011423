"""The month pack download: /finance/pack/<YYYY-MM>.xlsx (finance and admin). A user scoped to
some business lines gets the pack of their lines; an open month answers 409."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path
from django.utils.text import slugify
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of
from apps.common.replica import replica_view
from apps.common.sheets import xlsx_response
from apps.finance.pack import PackError, month_pack_tables
from apps.ledger.services.periods import parse_month


@replica_view
@require_GET
@login_required
def month_pack(request: HttpRequest, month: str) -> HttpResponse:
    """The closed month's workbook: cover, checklist, trial balance, spend, budget vs actual,
    findings, waste."""
    if not user_has_role(request.user, "finance", "admin"):
        raise PermissionDenied(_("The month pack is for the finance and admin roles."))
    parsed = parse_month(month, error=Http404)
    lines = business_lines_of(request.user)
    try:
        tables = month_pack_tables(month=parsed, business_lines=lines)
    except PackError as exc:
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
    # Business lines are names from records: only their slugs go into the header.
    suffix = "" if lines is None else "-" + "-".join(slugify(line) for line in lines)
    return xlsx_response(tables, filename=f"month-pack-{parsed:%Y-%m}{suffix[:80]}")


urlpatterns = [
    path("finance/pack/<str:month>.xlsx", month_pack, name="month-pack"),
]
