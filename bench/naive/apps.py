from __future__ import annotations

from django.apps import AppConfig


class NaiveConfig(AppConfig):
    name = "bench.naive"
    label = "bench_naive"
    default_auto_field = "django.db.models.BigAutoField"
