from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AuditsConfig(AppConfig):
    name = "apps.audits"
    label = "audits"
    verbose_name = _("Monthly token audit")

    def ready(self) -> None:
        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.audits.models import ModelDowngrade

        audited(ModelDowngrade)
        # Engineers decide the downgrades; finance reads the audits.
        role_grants(self.label, {"engineer": ("add", "change", "delete", "view")}, model="modeldowngrade")
        role_grants(self.label, {"engineer": ("view",), "finance": ("view",)})
