"""The Content-Security-Policy of every response: scripts only from this site or with the
response's nonce (the plotly figures' inline script), nothing framed, no plugin, forms and
base URL to this site. Styles may be inline (plotly and the templates style elements in place).

A page's inline script carries `csp_nonce()`, read from the request being answered (a context
variable the middleware sets); event-handler attributes (`onchange=`) are never allowed, so
the pages use static/common/autosubmit.js instead."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

_NONCE: ContextVar[str] = ContextVar("csp_nonce", default="")
POLICY = (
    "default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


def csp_nonce() -> str:
    """The nonce of the response being made ("" outside a request)."""
    return _NONCE.get()


def content_security_policy(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        nonce = secrets.token_urlsafe(16)
        token = _NONCE.set(nonce)
        try:
            response = get_response(request)
        finally:
            _NONCE.reset(token)
        response.headers.setdefault("Content-Security-Policy", POLICY.format(nonce=nonce))
        return response

    return middleware
