from __future__ import annotations

from django.urls import path

from apps.classification import views

urlpatterns = [
    path("rules/", views.rules, name="rules"),
    path("rules/draft/", views.rules_draft, name="rules-draft"),
    path("rules/<int:version>/try/", views.rules_try, name="rules-try"),
]
