from __future__ import annotations

from apps.ledger.pages import budgets, close, finance, plans, reconciliation, sheets

urlpatterns = [
    *finance.urlpatterns,
    *close.urlpatterns,
    *plans.urlpatterns,
    *sheets.urlpatterns,
    *budgets.urlpatterns,
    *reconciliation.urlpatterns,
]
