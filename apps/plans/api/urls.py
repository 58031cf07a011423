from __future__ import annotations

from django.urls import path

from apps.plans.api import budget_state, views

urlpatterns = [
    path("ledger/budget-vs-actual", views.BudgetVsActualView.as_view(), name="ledger-budget-vs-actual"),
    path("budgets/state", budget_state.BudgetStateView.as_view(), name="budgets-state"),
    path("ledger/budgets", views.BudgetsView.as_view(), name="ledger-budgets"),
    path("ledger/revenue", views.RevenueView.as_view(), name="ledger-revenue"),
]
