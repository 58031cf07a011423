"""Roles are Django groups: admin, finance, engineer, viewer (a superuser has every role)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


# A user object's roles, read once: a page asks for them a dozen times (its view, the nav's
# links, the header's), and each asked the database. Django keeps a user's permissions on the
# user object alike (ModelBackend's _perm_cache): a request loads its user afresh; a change of
# the user's groups through this object drops what was kept (AccountsConfig.ready).
ROLES_KEPT = "_costplatform_roles"


def role_names(user: Any) -> frozenset[str]:
    """The roles of a signed-in user's groups (not the superuser's implied ones)."""
    kept = getattr(user, ROLES_KEPT, None)
    if kept is None:
        kept = frozenset(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        setattr(user, ROLES_KEPT, kept)
    return kept


def roles_forgotten(instance: Any, **_: Any) -> None:
    """m2m_changed on a user's groups: the roles kept on that user object are read again."""
    instance.__dict__.pop(ROLES_KEPT, None)


def user_has_role(user: Any, *roles: str) -> bool:
    if not (user and user.is_authenticated) or not hasattr(user, "groups"):
        return False
    if user.is_superuser:
        return True
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"unknown roles {sorted(unknown)}")
    return not role_names(user).isdisjoint(roles)


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


# The Django admin permissions of each role, declared by the app that owns the models (in its
# AppConfig.ready(), `role_grants(self.label, {...})`), so accounts names no app above it. Admin
# access also needs the user's staff flag; a superuser has everything.
ACTIONS = ("add", "change", "delete", "view")


@dataclass(frozen=True)
class Grant:
    app_label: str  # or "*": every app
    model: str  # a model's name in lower case, or "*": every model of the app
    actions: tuple[str, ...]


_grants: dict[str, list[Grant]] = {role: [] for role in ROLES}


def role_grants(app_label: str, grants: Mapping[str, Sequence[str]], *, model: str = "*") -> None:
    """Give roles admin permissions on the models of `app_label` (one model when `model` names
    it): `role_grants(self.label, {"finance": ("add", "change", "view")})`. Grants add up; the
    groups get them at the next migrate (`role_permissions_sync`)."""
    for role, actions in grants.items():
        if role not in _grants:
            raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
        if not actions or set(actions) - set(ACTIONS):
            raise ValueError(f"actions are some of {', '.join(ACTIONS)}, not {actions!r}")
        grant = Grant(app_label, model, tuple(actions))
        if grant not in _grants[role]:
            _grants[role].append(grant)


def role_grants_of(role: str) -> tuple[Grant, ...]:
    return tuple(_grants[role])


def role_permissions_sync(*, app_config: Any = None, **kwargs: Any) -> None:
    """Give each role group exactly its admin permissions (run after every migrate, so models
    added later are covered, and a permission taken from a role is taken from its group).

    As a post_migrate receiver it is sent once for each app in turn, each send making that app's
    permissions first: it syncs once, at the last app's, when every permission exists."""
    from django.apps import apps
    from django.contrib.auth.models import Group, Permission

    if app_config is not None and app_config is not [c for c in apps.get_app_configs() if c.models_module][-1]:
        return

    for role, grants in _grants.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = Permission.objects.none()
        for grant in grants:
            perms = Permission.objects.filter(codename__regex=rf"^({'|'.join(grant.actions)})_")
            if grant.app_label != "*":
                perms = perms.filter(content_type__app_label=grant.app_label)
            if grant.model != "*":
                perms = perms.filter(content_type__model=grant.model)
            wanted = wanted | perms
        group.permissions.set(wanted.distinct())
