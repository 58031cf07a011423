from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PricingConfig(AppConfig):
    name = "apps.pricing"
    label = "pricing"
    verbose_name = _("Pricing")

    def ready(self) -> None:
        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.common.hourgrid import hour_table_register
        from apps.pricing import checks  # noqa: F401  (registers the system checks)
        from apps.pricing.models import CostPool, HourlyCost, PoolIdleHour, Price, PriceVersion

        audited(PriceVersion, Price, CostPool)
        role_grants(self.label, {"finance": ("add", "change", "view")})
        hour_table_register(HourlyCost, PoolIdleHour)
