from __future__ import annotations

from apps.ledger.pages import budgets, close, finance, holds, plans, rates, reconciliation, sheets

urlpatterns = [
    *finance.urlpatterns,
    *close.urlpatterns,
    *plans.urlpatterns,
    *sheets.urlpatterns,
    *budgets.urlpatterns,
    *holds.urlpatterns,
    *reconciliation.urlpatterns,
    *rates.urlpatterns,
]
