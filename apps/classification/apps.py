from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClassificationConfig(AppConfig):
    name = "apps.classification"
    label = "classification"
    verbose_name = _("Token classification")

    def ready(self) -> None:
        from apps.auditlog.registry import audited
        from apps.classification.models import Rule, RuleSet

        audited(RuleSet, Rule)
