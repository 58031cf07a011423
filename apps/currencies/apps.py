from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CurrenciesConfig(AppConfig):
    """The functional currency, exchange rates by day and pair, and the days missing one
    (apps/currencies/rates.py); the rates page. Below the books: accrual converts with it."""

    name = "apps.currencies"
    label = "currencies"
    verbose_name = _("Currencies")

    def ready(self) -> None:
        from apps.accounts.roles import role_grants
        from apps.auditlog.registry import audited
        from apps.currencies import checks  # noqa: F401 (registers the system check)
        from apps.currencies.models import ExchangeRate
        from apps.currencies.rates import rate_of_day
        from apps.pricing.conversion import rate_reader

        audited(ExchangeRate)
        role_grants(self.label, {"finance": ("add", "change", "view")})
        rate_reader(rate_of_day)  # a price list in another currency is converted at the day's rate
