from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AuditsConfig(AppConfig):
    name = "apps.audits"
    label = "audits"
    verbose_name = _("Monthly token audit")

    def ready(self) -> None:
        from apps.auditlog.registry import audited
        from apps.audits.models import ModelDowngrade

        audited(ModelDowngrade)
