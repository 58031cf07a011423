from __future__ import annotations

from apps.plans.pages import budgets, holds, plans

urlpatterns = [*plans.urlpatterns, *budgets.urlpatterns, *holds.urlpatterns]
