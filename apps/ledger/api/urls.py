from __future__ import annotations

from django.urls import path

from apps.ledger.api import figures, periods, views

urlpatterns = [
    path("ledger/figures", figures.FiguresView.as_view(), name="ledger-figures"),
    path("ledger/accounts", views.AccountsView.as_view(), name="ledger-accounts"),
    path("ledger/trial-balance", views.TrialBalanceView.as_view(), name="ledger-trial-balance"),
    path("ledger/matrix", views.MatrixView.as_view(), name="ledger-matrix"),
    path("ledger/journal", views.JournalView.as_view(), name="ledger-journal"),
    path("ledger/journal/<int:pk>/usage", views.LineUsageView.as_view(), name="ledger-line-usage"),
    path("ledger/periods", periods.PeriodsView.as_view(), name="ledger-periods"),
    path("ledger/periods/<str:month>/close", periods.PeriodCloseView.as_view(), name="ledger-period-close"),
    path("ledger/periods/<str:month>/reopen", periods.PeriodReopenView.as_view(), name="ledger-period-reopen"),
    path("ledger/findings", periods.FindingsView.as_view(), name="ledger-findings"),
]
