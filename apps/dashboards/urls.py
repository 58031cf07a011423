from __future__ import annotations

from django.urls import path

from apps.dashboards import saved_views, views

app_name = "dashboards"
urlpatterns = [
    path("overview/", views.overview, name="overview"),
    path("figures/", views.figures_page, name="figures"),
    path("waste/", views.waste, name="waste"),
    path("waste/requests/", views.requests_list, name="requests"),
    path("waste/record/", views.record_page, name="record"),
    path("waste/duplicates/", views.duplicates, name="duplicates"),
    path("waste/conversation/", views.conversation, name="conversation"),
    path("views/save/", saved_views.view_save, name="view-save"),
    path("views/<int:view_id>/", saved_views.view_open, name="view-open"),
]
