from __future__ import annotations

from django.urls import path

from apps.ingest import views

urlpatterns = [
    path("collectors/", views.collectors, name="collectors"),
]
