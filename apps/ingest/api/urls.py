from __future__ import annotations

from django.urls import path

from apps.ingest.api import views

urlpatterns = [
    path("records", views.RecordsView.as_view(), name="records"),
    path("usage", views.UsageView.as_view(), name="usage"),
    path("rejections", views.RejectionsView.as_view(), name="rejections"),
]
