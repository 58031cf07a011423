from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CommonConfig(AppConfig):
    """Helpers every layer shares (time buckets); it imports no other app."""

    name = "apps.common"
    label = "common"
    verbose_name = _("Common")

    def ready(self) -> None:
        from apps.common import checks  # noqa: F401  (registers the system checks)
        from apps.common.db import bytea_dumper_fast

        bytea_dumper_fast()
