from __future__ import annotations

from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "apps.audits"
    label = "audits"
    verbose_name = "Monthly token audit"
