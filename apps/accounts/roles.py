"""Roles are Django groups: admin, finance, engineer, viewer (a superuser has every role)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from apps.accounts.models import ROLES


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
