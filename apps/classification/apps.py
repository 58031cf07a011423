from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClassificationConfig(AppConfig):
    name = "apps.classification"
    label = "classification"
    verbose_name = _("Token classification")

    def ready(self) -> None:
        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.classification.models import HourlyClass, Rule, RuleSet
        from apps.common.hourgrid import hour_table_register

        audited(RuleSet, Rule)
        # Engineers write the rules; every role reads the classification.
        role_grants(self.label, {"engineer": ("add", "change", "view")}, model="ruleset")
        role_grants(self.label, {"engineer": ("add", "change", "delete", "view")}, model="rule")
        role_grants(self.label, {role: ("view",) for role in ("engineer", "finance", "viewer")})
        hour_table_register(HourlyClass)
