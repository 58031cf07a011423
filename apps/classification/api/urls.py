from __future__ import annotations

from django.urls import path

from apps.classification.api import views

urlpatterns = [
    path("rulesets", views.RuleSetsView.as_view(), name="rulesets"),
    path("rulesets/<int:version>/rules", views.RulesView.as_view(), name="ruleset-rules"),
    path("rulesets/<int:version>/try", views.RuleSetTryView.as_view(), name="ruleset-try"),
    path("rulesets/<int:version>/activate", views.RuleSetActivateView.as_view(), name="ruleset-activate"),
]
