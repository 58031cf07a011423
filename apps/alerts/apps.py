from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AlertsConfig(AppConfig):
    name = "apps.alerts"
    label = "alerts"
    verbose_name = _("Alerts")

    def ready(self) -> None:
        from apps.alerts import checks  # noqa: F401  (registers the system checks)
