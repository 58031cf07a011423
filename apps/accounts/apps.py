from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import m2m_changed, post_migrate
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = _("Accounts and collector keys")

    def ready(self) -> None:
        from django.contrib import admin
        from django.contrib.auth.models import User

        from apps.accounts.admin_scope import site_scope_others
        from apps.accounts.models import CollectorKey, UserScope
        from apps.accounts.roles import role_permissions_sync, roles_forgotten
        from apps.auditlog.registry import audited

        audited(CollectorKey, UserScope)
        _roles_granted(self.label)
        post_migrate.connect(role_permissions_sync, dispatch_uid="accounts.role_permissions_sync")
        m2m_changed.connect(roles_forgotten, sender=User.groups.through, dispatch_uid="accounts.roles_forgotten")
        # Every admin module is loaded by now (the admin app, listed first, loads them in its
        # ready()): the ModelAdmins of other packages (auth's groups, the beat schedules) are
        # scoped too, as models spanning business lines.
        site_scope_others(admin.site)


def _roles_granted(label: str) -> None:
    """The admin role has every permission; accounts grants on its own models and on the leaf's
    (apps.common imports no app, so the runs' progress is granted here)."""
    from apps.accounts.roles import ACTIONS, role_grants

    role_grants("*", {"admin": ACTIONS})
    # What a key may write is an admin's (docs/security.md); an engineer sees the keys.
    role_grants(label, {"engineer": ("view",)}, model="collectorkey")
    # The runs' progress, read as the tables they fill.
    role_grants("common", {role: ("view",) for role in ("engineer", "finance", "viewer")}, model="jobrun")
