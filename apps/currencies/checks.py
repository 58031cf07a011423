"""System check: the functional currency is one the price book knows (currencies.E001)."""

from __future__ import annotations

from typing import Any

from django.core import checks

from apps.currencies.rates import functional_currency
from apps.pricing.models import Currency


@checks.register()
def functional_currency_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A journal in a currency no price, pool or rate can name would book nothing it could convert."""
    if app_configs is not None and not any(c.label == "currencies" for c in app_configs):
        return []
    if functional_currency() in Currency.values:
        return []
    return [
        checks.Error(
            f"LEDGER_FUNCTIONAL_CURRENCY is {functional_currency()!r}: it must be one of {', '.join(Currency.values)}",
            hint="Set COSTPLATFORM_FUNCTIONAL_CURRENCY to one of them (CNY by default).",
            id="currencies.E001",
        )
    ]
