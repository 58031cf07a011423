from __future__ import annotations

from apps.ledger.pages import budgets, close, holds, plans, rates

urlpatterns = [
    *close.urlpatterns,
    *plans.urlpatterns,
    *budgets.urlpatterns,
    *holds.urlpatterns,
    *rates.urlpatterns,
]
