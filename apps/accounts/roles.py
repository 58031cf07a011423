"""Roles are Django groups: admin, finance, engineer, viewer (a superuser has every role)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from rest_framework.permissions import BasePermission

from apps.accounts.models import ROLES

# Who reads the pages of every app: any role; a login alone reads nothing.
READERS = ROLES


def user_has_role(user: Any, *roles: str) -> bool:
    if not (user and user.is_authenticated) or not hasattr(user, "groups"):
        return False
    if user.is_superuser:
        return True
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"unknown roles {sorted(unknown)}")
    return user.groups.filter(name__in=roles).exists()


def roles_required(*roles: str) -> type[BasePermission]:
    """A DRF permission class: the user has one of these roles."""

    class HasRole(BasePermission):
        message = f"This needs one of the roles: {', '.join(roles)}."

        def has_permission(self, request: Any, view: Any) -> bool:
            return user_has_role(request.user, *roles)

    HasRole.__name__ = f"HasRole_{'_'.join(roles)}"
    return HasRole


def reader_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A read page of any app: GET only, after a login, for a user with a role. What the page
    shows beyond that (money, other business lines) is the page's own check."""

    @wraps(view)
    @require_GET
    @login_required
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not user_has_role(request.user, *READERS):
            raise PermissionDenied("the pages need a role: admin, finance, engineer or viewer")
        return view(request, *args, **kwargs)

    return checked


class IsReader(BasePermission):
    """DRF's default permission (REST_FRAMEWORK in settings): reading needs one of the roles,
    a login alone reads nothing. Collector keys are no person and hold no role."""

    message = f"Reading needs one of the roles: {', '.join(ROLES)}; a login alone is not enough."

    def has_permission(self, request: Any, view: Any) -> bool:
        return user_has_role(request.user, *ROLES)


# Django admin permissions of each role, as (app label, model or "*", actions). Admin access
# also needs the user's staff flag; a superuser has everything.
ROLE_PERMISSIONS: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "admin": (("*", "*", ("add", "change", "delete", "view")),),
    "engineer": (
        ("classification", "ruleset", ("add", "change", "view")),
        ("classification", "rule", ("add", "change", "delete", "view")),
        ("classification", "*", ("view",)),
        ("ingest", "*", ("view",)),
        ("accounts", "collectorkey", ("view",)),  # what a key may write is an admin's (docs/security.md)
        ("audits", "modeldowngrade", ("add", "change", "delete", "view")),
        ("audits", "*", ("view",)),
        ("common", "jobrun", ("view",)),
    ),
    "finance": (
        ("pricing", "*", ("add", "change", "view")),
        ("ledger", "*", ("add", "change", "view")),
        ("reconciliation", "*", ("add", "change", "view")),
        ("currencies", "*", ("add", "change", "view")),
        ("plans", "*", ("add", "change", "view")),
        ("classification", "*", ("view",)),
        ("ingest", "*", ("view",)),
        ("audits", "*", ("view",)),
        ("common", "jobrun", ("view",)),
    ),
    "viewer": (
        ("ingest", "*", ("view",)),
        ("classification", "*", ("view",)),
        ("common", "jobrun", ("view",)),  # the runs' progress, as the classification tables
    ),
}


def role_permissions_sync(**kwargs: Any) -> None:
    """Give each role group exactly its admin permissions (run after every migrate, so models
    added later are covered, and a permission taken from a role here is taken from its group)."""
    from django.contrib.auth.models import Group, Permission

    for role, grants in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = Permission.objects.none()
        for app_label, model, actions in grants:
            perms = Permission.objects.filter(codename__regex=rf"^({'|'.join(actions)})_")
            if app_label != "*":
                perms = perms.filter(content_type__app_label=app_label)
            if model != "*":
                perms = perms.filter(content_type__model=model)
            wanted = wanted | perms
        group.permissions.set(wanted.distinct())
