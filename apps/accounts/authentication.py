from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_authenticate


class CollectorPrincipal(AnonymousUser):
    """The request's user when a collector key authenticated it: a source, not a person."""

    def __init__(self, key: CollectorKey) -> None:
        super().__init__()
        self.collector_key = key

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True


class CollectorKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <collector key>`; request.auth is the CollectorKey."""

    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[CollectorPrincipal, CollectorKey] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <collector key>'.")
        key = collector_key_authenticate(secret=header[1].decode("latin-1"))
        if key is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked collector key.")
        return CollectorPrincipal(key), key

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class CollectorKeyScheme(OpenApiAuthenticationExtension):
    target_class = "apps.accounts.authentication.CollectorKeyAuthentication"
    name = "collectorKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A collector key (cpk_…)."}
