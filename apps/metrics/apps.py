from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MetricsConfig(AppConfig):
    name = "apps.metrics"
    label = "metrics"
    verbose_name = _("Metrics")

    def ready(self) -> None:
        from apps.metrics import checks  # noqa: F401  (registers the system checks)
