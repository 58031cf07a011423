from __future__ import annotations

from django.urls import path

from apps.ledger import views

urlpatterns = [
    path("finance/", views.finance_dashboard, name="finance"),
    path("finance/plotly.min.js", views.plotly_js, name="plotly-js"),
]
