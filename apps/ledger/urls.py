from __future__ import annotations

from apps.ledger.pages import budgets, close, holds, plans

urlpatterns = [
    *close.urlpatterns,
    *plans.urlpatterns,
    *budgets.urlpatterns,
    *holds.urlpatterns,
]
