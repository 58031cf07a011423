"""The ingest API; `records` (POST stores a batch) is mounted by apps.pipeline.urls, with
classification composed in."""

from __future__ import annotations

from django.urls import path

from apps.ingest.api import views

urlpatterns = [
    path("usage", views.UsageView.as_view(), name="usage"),
    path("rejections", views.RejectionsView.as_view(), name="rejections"),
]
