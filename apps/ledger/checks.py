"""System checks: the functional currency is one the price book knows (ledger.E001); the dims
team and caller budgets count by are kept in the rollups (ledger.W001)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from apps.ledger.services.rates import functional_currency
from apps.pricing.models import Currency


@checks.register()
def functional_currency_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A journal in a currency no price, pool or rate can name would book nothing it could convert."""
    if app_configs is not None and not any(c.label == "ledger" for c in app_configs):
        return []
    if functional_currency() in Currency.values:
        return []
    return [
        checks.Error(
            f"LEDGER_FUNCTIONAL_CURRENCY is {functional_currency()!r}: it must be one of {', '.join(Currency.values)}",
            hint="Set COSTPLATFORM_FUNCTIONAL_CURRENCY to one of them (CNY by default).",
            id="ledger.E001",
        )
    ]


# The rollup dims a budget's scope is read from (apps/ledger/budget_state.py).
BUDGET_SCOPE_DIMS = ("business_line", "team", "caller")


@checks.register()
def budget_scope_dims_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A team or caller budget sums the rollups' team or caller dim: without it, it counts nothing."""
    if app_configs is not None and not any(c.label == "ledger" for c in app_configs):
        return []
    missing = [dim for dim in BUDGET_SCOPE_DIMS if dim not in settings.ROLLUP_DIMS]
    if not missing:
        return []
    return [
        checks.Warning(
            f"COSTPLATFORM_ROLLUP_DIMS lacks {', '.join(missing)}: budgets of that scope count no usage and never hold",
            hint="Keep business_line, team and caller in COSTPLATFORM_ROLLUP_DIMS (docs/budgets.md).",
            id="ledger.W001",
        )
    ]
