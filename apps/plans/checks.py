"""System check: the dims team and caller budgets count by are kept in the rollups (plans.W001)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

# The rollup dims a budget's scope is read from (apps/plans/budget_state.py).
BUDGET_SCOPE_DIMS = ("business_line", "team", "caller")


@checks.register()
def budget_scope_dims_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A team or caller budget sums the rollups' team or caller dim: without it, it counts nothing."""
    if app_configs is not None and not any(c.label == "plans" for c in app_configs):
        return []
    missing = [dim for dim in BUDGET_SCOPE_DIMS if dim not in settings.ROLLUP_DIMS]
    if not missing:
        return []
    return [
        checks.Warning(
            f"COSTPLATFORM_ROLLUP_DIMS lacks {', '.join(missing)}: budgets of that scope count no usage and never hold",
            hint="Keep business_line, team and caller in COSTPLATFORM_ROLLUP_DIMS (docs/budgets.md).",
            id="plans.W001",
        )
    ]
