"""Saved views: a named filter set of one user, kept as the page's path and query, listed beside
the filters of every dashboards page and shareable as a link (/views/<id>/) that opens the page
for whoever follows it, under their own role and business lines."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404
from django.urls import Resolver404, resolve
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.roles import READERS, user_has_role
from apps.dashboards.models import SavedView
from apps.dashboards.tables import NOT_CARRIED

NAMESPACE = "dashboards"
NO_NAME = "A saved view needs a name."
NOT_A_PAGE = "A saved view is of a dashboards page."


def saved_views_of(request: HttpRequest) -> list[SavedView]:
    return list(SavedView.objects.filter(user_id=request.user.pk)) if request.user.is_authenticated else []


def _page_of(path: str) -> str:
    """`path` when it is a dashboards page, else Http404 (a saved view never leads off the site)."""
    try:
        match = resolve(path)
    except Resolver404 as exc:
        raise Http404(NOT_A_PAGE) from exc
    if match.namespace != NAMESPACE or not path.startswith("/"):
        raise Http404(NOT_A_PAGE)
    return path


def _reader(request: HttpRequest) -> None:
    if not user_has_role(request.user, *READERS):
        raise PermissionDenied("the pages need a role: admin, finance, engineer or viewer")


@require_POST
@login_required
def view_save(request: HttpRequest) -> HttpResponse:
    """Keeps the page and query posted under the name (the user's view of that name replaced)."""
    _reader(request)
    name = request.POST.get("name", "").strip()[:100]
    if not name:
        return HttpResponseBadRequest(_(NO_NAME), content_type="text/plain; charset=utf-8")
    path = _page_of(request.POST.get("path", ""))
    query = _kept_query(request.POST.get("query", ""))
    SavedView.objects.update_or_create(user=request.user, name=name, defaults={"path": path, "query": query})
    return HttpResponseRedirect(path + ("?" + query if query else ""))


def _kept_query(query: str) -> str:
    kept = QueryDict(query.lstrip("?"), mutable=True)
    for name in NOT_CARRIED:
        kept.pop(name, None)
    return kept.urlencode()


@require_GET
@login_required
def view_open(request: HttpRequest, view_id: int) -> HttpResponse:
    """The shared link of a saved view: its page with its filters, for any reader."""
    _reader(request)
    saved = get_object_or_404(SavedView, pk=view_id)
    return HttpResponseRedirect(_page_of(saved.path) + ("?" + saved.query if saved.query else ""))


def saved_views_context(request: HttpRequest) -> dict[str, Any]:
    """What the saved views' box of a page shows: the user's views and this page's query to save."""
    query = request.GET.copy()
    for name in NOT_CARRIED:
        query.pop(name, None)
    return {"saved_views": saved_views_of(request), "saved_path": request.path, "saved_query": query.urlencode()}
