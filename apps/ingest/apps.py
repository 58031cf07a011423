from __future__ import annotations

from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "apps.ingest"
    label = "ingest"
    verbose_name = "Token record ingest"
