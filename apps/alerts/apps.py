from __future__ import annotations

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "apps.alerts"
    label = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from apps.alerts import checks  # noqa: F401  (registers the system checks)
