"""Request checks that hold for every view."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

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
