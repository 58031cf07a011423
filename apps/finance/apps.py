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

    def ready(self) -> None:
        from django.urls import reverse

        from apps.currencies.links import PAGES as rates_links
        from apps.ledger.links import page_link_register

        # The books (and the rates page) link to the finance page, the journal and the month pack
        # by these names.
        rates_links.register("finance", lambda: reverse("finance"))
        page_link_register("finance", lambda: reverse("finance"))
        page_link_register("journal", lambda: reverse("finance-journal"))
        page_link_register("month pack", lambda month: reverse("month-pack", kwargs={"month": month}))
