from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts and collector keys"

    def ready(self) -> None:
        from apps.accounts.roles import role_permissions_sync

        post_migrate.connect(role_permissions_sync, dispatch_uid="accounts.role_permissions_sync")
