"""Request checks that hold for every view."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.utils import timezone

from apps.common.buckets import display_zone as zone_of
from apps.common.replica import replica_reads, replica_view_of
from costplatform.routers import health

DISPLAY_ZONE = "display_zone"  # the session key of the reader's zone (costplatform.views.display_zone_set)
NUL_REFUSED = "The query string holds a NUL character (%00), which no parameter can."


def refuse_nul_in_query(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """A query parameter (name or value) holding NUL is a 400 before any view reads it: views put
    parameters into SQL, and PostgreSQL text cannot hold NUL (a 500 there; found by schemathesis
    on /api/v1/rejections?source=)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if "%00" in request.META.get("QUERY_STRING", "") and any(
            "\x00" in name or any("\x00" in value for value in values) for name, values in request.GET.lists()
        ):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": NUL_REFUSED}, status=400)
            return HttpResponseBadRequest(NUL_REFUSED)
        return get_response(request)

    return middleware


def display_zone(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Pages show times in the reader's chosen zone (the accounting zone until they choose):
    Django's date filter and the `when` filter read the zone activated here. The API is left
    alone: its instants stay as the contract writes them (DRF would render them in this zone)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            return get_response(request)
        timezone.activate(zone_of(request.session.get(DISPLAY_ZONE)))
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return middleware


_READ_METHODS = frozenset({"GET", "HEAD"})


class ReplicaPages:
    """GETs of the views marked `@replica_view` (apps.common.replica; docs/scaling.md) run inside
    `replica_reads()`; when the replica fails one mid-way (stopped, restarted), the view runs again
    with every read on the primary, so the page answers. Sign-in, sessions and roles stay on the
    primary whatever the view (routers.py)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not _replica_view(request):
            return self.get_response(request)
        with replica_reads() as reads:
            request.replica_reads = reads  # type: ignore[attr-defined]
            return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        reads = getattr(request, "replica_reads", None)
        if reads is None or reads.off or not reads.used or not isinstance(exception, DatabaseError):
            return None
        health.failed()
        reads.off, reads.used = True, False
        match = request.resolver_match
        assert match is not None
        return match.func(request, *match.args, **match.kwargs)  # type: ignore[no-any-return]


def _replica_view(request: HttpRequest) -> bool:
    if not settings.DATABASE_REPLICA_URL or request.method not in _READ_METHODS:
        return False
    try:
        return replica_view_of(resolve(request.path_info).func)
    except Resolver404:
        return False
