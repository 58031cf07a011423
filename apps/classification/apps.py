from __future__ import annotations

from django.apps import AppConfig


class ClassificationConfig(AppConfig):
    name = "apps.classification"
    label = "classification"
    verbose_name = "Token classification"
