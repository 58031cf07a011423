from __future__ import annotations

from django.urls import path

from apps.pricing import views

urlpatterns = [
    path("prices/", views.prices, name="prices"),
]
