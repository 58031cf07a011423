from __future__ import annotations

from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "apps.metrics"
    label = "metrics"
    verbose_name = "Metrics"

    def ready(self) -> None:
        from apps.metrics import checks  # noqa: F401  (registers the system checks)
