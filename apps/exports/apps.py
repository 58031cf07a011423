from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ExportsConfig(AppConfig):
    """The books in open formats for other systems: FOCUS (focus.py) and Parquet for warehouses
    (warehouse.py). No models: they read the journal, the records' dims and the priced rollups."""

    name = "apps.exports"
    label = "exports"
    verbose_name = _("Exports")

    def ready(self) -> None:
        from apps.ledger.signals import period_closed

        period_closed.connect(_warehouse_export_after_commit, dispatch_uid="exports.warehouse_after_close")


def _warehouse_export_after_commit(sender: Any, *, month: Any, **kwargs: Any) -> None:
    """With COSTPLATFORM_WAREHOUSE_EXPORT_TO set, the closed month goes to the warehouse
    (manage.py export_parquet's files) once the close is committed, in the worker."""
    from django.conf import settings
    from django.db import transaction

    if not getattr(settings, "WAREHOUSE_EXPORT_TO", ""):
        return
    from apps.exports.tasks import month_export

    transaction.on_commit(lambda: month_export.delay(f"{month:%Y-%m}"))
