from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class IngestConfig(AppConfig):
    name = "apps.ingest"
    label = "ingest"
    verbose_name = _("Token record ingest")

    def ready(self) -> None:
        from apps.accounts.lines import lines_source
        from apps.accounts.roles import role_grants
        from apps.common.hourgrid import hour_table_register
        from apps.ingest.models import HourlyUsage

        lines_source(_lines_recorded)
        role_grants(self.label, {role: ("view",) for role in ("engineer", "finance", "viewer")})
        hour_table_register(HourlyUsage)


def _lines_recorded() -> list[str]:
    """The business lines records were sent with (their dim sets; an index serves it)."""
    from apps.ingest.models import DimSet

    return list(DimSet.objects.order_by().values_list("business_line", flat=True).distinct())
