"""Single sign-on through an OpenID Connect provider (mozilla-django-oidc), off unless
COSTPLATFORM_OIDC_ISSUER and COSTPLATFORM_OIDC_CLIENT_ID are set.

The provider's endpoints come from its discovery document. At every login the roles claim
(group names, mapped to the four roles) and the business-lines claim are read again: the
user's role groups and UserScope.business_lines are set to what they say, each change in the
audit log. A person none of whose groups maps to a role is refused (and loses the roles an
earlier login gave), and so is a person whose lines claim is absent or empty: every line takes
the claim's explicit COSTPLATFORM_OIDC_ALL_LINES value ("*"), never its absence, and a refused
login leaves the scope an admin set as it was. The claims are the ID token's and the userinfo
endpoint's (which wins where both have one). SSO users are matched by the provider's `sub`, never by e-mail, and get
no password: local accounts (the first admin's) keep logging in with theirs."""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.accounts.lines import business_lines_unknown
from apps.accounts.models import ROLES, UserScope
from apps.auditlog.models import AuditEntry
from apps.auditlog.services import audit_entry_record

logger = logging.getLogger(__name__)

# The session key of the business lines a login's claim named that the platform does not know.
SCOPE_UNKNOWN = "costplatform_scope_unknown_lines"

USERNAME_PREFIX = "oidc:"  # a colon no local username has (Django's validator refuses it)

# mozilla-django-oidc setting -> key of the provider's discovery document
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


def sso_enabled() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_RP_CLIENT_ID)


@functools.lru_cache(maxsize=8)
def _discovery(issuer: str) -> dict[str, Any]:
    answer = requests.get(f"{issuer.rstrip('/')}/.well-known/openid-configuration", timeout=settings.OIDC_TIMEOUT)
    answer.raise_for_status()
    document: dict[str, Any] = answer.json()
    return document


def sso_setting(attr: str, *default: Any) -> Any:
    """A mozilla-django-oidc setting; the endpoints from the issuer's discovery document unless
    set explicitly."""
    explicit = getattr(settings, attr, None)
    if attr in DISCOVERED and not explicit:
        return _discovery(settings.OIDC_ISSUER)[DISCOVERED[attr]]
    if explicit is None and default:
        return default[0]
    return explicit


@dataclass(frozen=True)
class Grant:
    """What the claims of one login give: role names and business lines (None: every line,
    given explicitly; empty: none, and the login is refused)."""

    roles: frozenset[str]
    lines: tuple[str, ...] | None

    @property
    def admitted(self) -> bool:
        return bool(self.roles) and self.lines != ()


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [str(item) for item in value if str(item).strip()]
    return []


def grant_of(*, claims: dict[str, Any]) -> Grant:
    """The roles (through COSTPLATFORM_OIDC_GROUP_ROLES, or groups named as a role) and lines."""
    mapping: dict[str, str] = settings.OIDC_GROUP_ROLES or {role: role for role in ROLES}
    groups = _strings(claims.get(settings.OIDC_ROLES_CLAIM))
    roles = frozenset(mapping[group] for group in groups if mapping.get(group) in ROLES)
    named = {line.strip() for line in _strings(claims.get(settings.OIDC_LINES_CLAIM)) if line.strip()}
    every = bool(settings.OIDC_ALL_LINES) and settings.OIDC_ALL_LINES in named
    return Grant(roles=roles, lines=None if every else tuple(sorted(named)))


def user_roles_set(*, user: Any, roles: frozenset[str]) -> None:
    """Make the user's role groups exactly `roles` (other groups untouched); audit a change."""
    before = sorted(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    if before == sorted(roles):
        return
    user.groups.remove(*Group.objects.filter(name__in=set(ROLES) - roles))
    user.groups.add(*(Group.objects.get_or_create(name=role)[0] for role in sorted(roles)))
    audit_entry_record(
        instance=user, action=AuditEntry.Action.UPDATE, before={"roles": before}, after={"roles": sorted(roles)}
    )


def user_lines_set(*, user: Any, lines: tuple[str, ...] | None) -> None:
    """Business lines of the user's scope, None for every line (the money flag is left to an
    admin). A save, so the audit log's receivers record it."""
    lines = lines or ()  # a scope's empty list is every line
    scope = UserScope.objects.filter(user=user).first()
    if scope is None:
        if lines:
            UserScope.objects.create(user=user, business_lines=list(lines))
        return
    if sorted(scope.business_lines) != list(lines):
        scope.business_lines = list(lines)
        scope.save()
    user._costplatform_scope = False  # apps.accounts.scopes caches it on the user object


def scope_unknown_note(*, request: HttpRequest, user: Any) -> None:
    """Business lines the provider's claim gave that no data, cost centre, budget or collector key
    of the platform carries: a typo in the provider's groups ("line:serach") that would show the
    person empty pages. The login stands (the provider is the source of the grant); the lines
    are logged for the operators and kept in the session, where every page names them to the
    person (costplatform.context_processors.scope_notice), until the next login."""
    scope = UserScope.objects.filter(user=user).first()
    unknown = business_lines_unknown(scope.business_lines if scope is not None else [])
    if unknown:
        logger.warning(
            "single sign-on: %s's business lines claim names lines the platform does not know: %s",
            user.username,
            ", ".join(map(str, unknown)),
        )
        request.session[SCOPE_UNKNOWN] = [{"name": u.name, "near": u.near} for u in unknown]
    else:
        request.session.pop(SCOPE_UNKNOWN, None)


def username_of(*, claims: dict[str, Any]) -> str:
    sub = str(claims.get("sub") or "")
    if not sub:
        raise SuspiciousOperation("the provider's answer has no sub")
    if len(USERNAME_PREFIX + sub) > 150:
        sub = hashlib.sha256(sub.encode()).hexdigest()
    return USERNAME_PREFIX + sub


class SsoBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, inert while SSO is off and for every other login (only
    the callback passes a nonce). Django makes one for each request of a user who came in
    through it (get_user), so the provider's settings and discovery document are read only in
    authenticate: a provider that is down, or SSO turned off, never fails a logged-in request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return sso_setting(attr, *args)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if not sso_enabled() or "nonce" not in kwargs:
            return None
        OIDCAuthenticationBackend.__init__(self)  # the endpoints, client and key settings
        user = super().authenticate(request, **kwargs)
        if user is not None and request is not None:
            scope_unknown_note(request=request, user=user)
        return user

    def verify_token(self, token: str, **kwargs: Any) -> Any:
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if payload.get("iss") != settings.OIDC_ISSUER or settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token is for another issuer or client")
        return payload

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The claims of the ID token (verified), with the userinfo endpoint's over them."""
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") not in (None, payload.get("sub")):
            raise SuspiciousOperation("the userinfo is of another subject than the ID token")
        return {**payload, **userinfo}

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=username_of(claims=claims))

    def create_user(self, claims: dict[str, Any]) -> Any:
        if not grant_of(claims=claims).admitted:
            return None  # never create an account that could read nothing
        user = self.UserModel.objects.create_user(username_of(claims=claims))  # no usable password
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        grant = grant_of(claims=claims)
        with transaction.atomic():
            user.email = str(claims.get("email") or "")[:254]
            user.first_name = str(claims.get("given_name") or claims.get("name") or "")[:150]
            user.last_name = str(claims.get("family_name") or "")[:150]
            user.save(update_fields=["email", "first_name", "last_name"])
            # No line: refused, without the roles an earlier login gave, the scope left as it was.
            user_roles_set(user=user, roles=grant.roles if grant.admitted else frozenset())
            if grant.admitted:
                user_lines_set(user=user, lines=grant.lines)
        return user if grant.admitted else None


class _WhenConfigured:
    """The library's views, reading this platform's settings, and a 404 while SSO is off."""

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return sso_setting(attr, *args)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not sso_enabled():
            raise Http404("single sign-on is not configured")
        response: HttpResponse = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return response


class SsoAuthenticate(_WhenConfigured, OIDCAuthenticationRequestView):
    """/oidc/authenticate/: off (404) unless SSO is configured."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if sso_enabled():
            super().__init__(*args, **kwargs)


class SsoCallback(_WhenConfigured, OIDCAuthenticationCallbackView):
    """/oidc/callback/: the provider sends the browser back here with the code."""
