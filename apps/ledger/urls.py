from __future__ import annotations

from apps.ledger.pages import close, finance, holds, plans, sheets

urlpatterns = [*finance.urlpatterns, *close.urlpatterns, *plans.urlpatterns, *sheets.urlpatterns, *holds.urlpatterns]
