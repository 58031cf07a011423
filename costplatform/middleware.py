"""Request checks that hold for every view."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils import timezone

from apps.common.buckets import display_zone as zone_of

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
