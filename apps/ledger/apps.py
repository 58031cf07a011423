from __future__ import annotations

from datetime import date
from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LedgerConfig(AppConfig):
    name = "apps.ledger"
    label = "ledger"
    verbose_name = _("Ledger")

    def ready(self) -> None:
        from apps.accounts.lines import lines_source
        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.currencies.signals import rate_changed
        from apps.ledger import models as books

        audited(books.Account, books.MappingRule, books.ElasticWindow, books.Period, books.CostCentre)
        audited(books.CloseRequest, books.FindingReview, books.IdlePolicy, books.ReservedShare)
        role_grants(self.label, {"finance": ("add", "change", "view")})
        lines_source(_lines_planned)
        rate_changed.connect(_rate_day_dirty, dispatch_uid="ledger.rate_day_dirty")


def _lines_planned() -> set[str]:
    """The business lines with a cost centre (a line may be planned before its first record)."""
    from apps.ledger.models import CostCentre

    return set(CostCentre.objects.values_list("business_line", flat=True))


def _rate_day_dirty(sender: Any, *, day: date, **kwargs: Any) -> None:
    """A day's rate was entered or changed: the next accrual books the day at it."""
    from apps.ledger.services.accrual import days_mark_dirty

    days_mark_dirty(days=[day])
