from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class FinanceConfig(AppConfig):
    """The finance pages, a reader above the books and the apps built on them: the month's books
    as finance reads them (month.py, tables.py, waste.py), the journal page (journal.py) and the
    closed month's pack (pack.py). No models."""

    name = "apps.finance"
    label = "finance"
    verbose_name = _("Finance")
