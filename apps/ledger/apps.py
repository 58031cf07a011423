from __future__ import annotations

from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "apps.ledger"
    label = "ledger"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from apps.ledger import checks  # noqa: F401 (registers the system checks)
