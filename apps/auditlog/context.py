"""Who is changing things: the current request, kept for the audit receivers.

The middleware stores the request (not the user): DRF authenticates inside the view and then
sets `request.user` on the Django request, so reading it at save time sees API users too."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

_request: ContextVar[HttpRequest | None] = ContextVar("auditlog_request", default=None)


def audit_context_middleware(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            return get_response(request)
        finally:
            _request.reset(token)

    return middleware


@dataclass(frozen=True)
class Actor:
    user: Any
    name: str
    source: str
    path: str


def current_actor() -> Actor:
    """The person behind the change being saved now, or the system outside a request."""
    request = _request.get()
    if request is None:
        return Actor(user=None, name="", source="system", path="")
    user = getattr(request, "user", None)
    person = user if user is not None and user.is_authenticated and getattr(user, "pk", None) else None
    if request.path.startswith(reverse("admin:index")):
        source = "admin"
    elif request.path.startswith("/api/"):
        source = "api"
    else:
        source = "web"
    return Actor(user=person, name=person.get_username() if person else "", source=source, path=request.path[:300])
