from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AuditlogConfig(AppConfig):
    name = "apps.auditlog"
    label = "auditlog"
    verbose_name = _("Audit log")

    def ready(self) -> None:
        # The audited models are registered by their own apps (registry.audited).
        from apps.auditlog.lockouts import lockouts_connect

        lockouts_connect()
