from __future__ import annotations

from django.urls import path

from apps.pricing.api import views

urlpatterns = [path("usage/classes", views.ClassUsageView.as_view(), name="usage-classes")]
