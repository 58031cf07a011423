"""Business-line scoping and money visibility of a person, on top of their role.

`business_lines_of(user)` is None for a user who sees every business line, else the list of
lines every page and read API filters to (by `ingest_dimset.business_line`)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _
from rest_framework.permissions import BasePermission

from apps.accounts.roles import roles_required, user_has_role

MONEY_ROLES = ("finance", "admin")


def _scope(user: Any) -> Any:
    from apps.accounts.models import UserScope

    if not (user and user.is_authenticated) or not getattr(user, "pk", None):
        return None
    cached = getattr(user, "_costplatform_scope", False)
    if cached is False:
        cached = UserScope.objects.filter(user_id=user.pk).first()
        user._costplatform_scope = cached
    return cached


def business_lines_of(user: Any) -> list[str] | None:
    """The business lines `user` may see; None = all (superusers always see all)."""
    if getattr(user, "is_superuser", False):
        return None
    scope = _scope(user)
    return sorted(scope.business_lines) if scope is not None and scope.business_lines else None


def sees_money(user: Any) -> bool:
    """Finance and admin see money; others only when their scope grants it."""
    if user_has_role(user, *MONEY_ROLES):
        return True
    scope = _scope(user)
    return bool(scope is not None and scope.can_see_money)


def finance_act_check(user: Any, *, refused: str, company_wide: str | None = None) -> None:
    """A finance act (closing a month, adjusting a bill, entering a rate, setting a plan) needs the
    finance or admin role, else PermissionDenied(`refused`); where `company_wide` is given, also a
    user who sees every business line, else PermissionDenied(`company_wide`). Both messages are
    marked with gettext_noop by the caller and translated here."""
    if not user_has_role(user, *MONEY_ROLES):
        raise PermissionDenied(_(refused))
    if company_wide is not None and business_lines_of(user) is not None:
        raise PermissionDenied(_(company_wide))


def line_visible(user: Any, business_line: str) -> bool:
    lines = business_lines_of(user)
    return lines is None or business_line in lines


COMPANY_WIDE = (
    "This shows data of every business line; a user scoped to some business lines cannot read it "
    "(their lines are on the dashboards and /finance/)."
)


def sees_all_lines(user: Any) -> bool:
    """Company-wide views (the ledger API, rejected records, rule trials) need this."""
    return business_lines_of(user) is None


class SeesAllLines(BasePermission):
    """DRF: refuse users scoped to some business lines."""

    message = COMPANY_WIDE

    def has_permission(self, request: Any, view: Any) -> bool:
        return sees_all_lines(request.user)


def company_wide(permission: type[BasePermission]) -> type[BasePermission]:
    """`permission`, and the user sees every business line."""

    class CompanyWide(permission):  # type: ignore[valid-type,misc]
        message = f"{permission.message} {COMPANY_WIDE}" if hasattr(permission, "message") else COMPANY_WIDE

        def has_permission(self, request: Any, view: Any) -> bool:
            return bool(super().has_permission(request, view)) and sees_all_lines(request.user)

    CompanyWide.__name__ = f"CompanyWide_{permission.__name__}"
    return CompanyWide


# Rules classify the tokens of every business line: writing or activating a rule set needs one
# of these roles and a user who sees every line.
RULE_EDITORS = ("admin", "engineer")
RulesEditor = company_wide(roles_required(*RULE_EDITORS))


def edits_rules(user: Any) -> bool:
    return user_has_role(user, *RULE_EDITORS) and sees_all_lines(user)
