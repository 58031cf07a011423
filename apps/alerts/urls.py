from __future__ import annotations

from django.urls import path

from apps.alerts import views

urlpatterns = [
    path("alerts/", views.alerts, name="alerts"),
    path("alerts/channels/", views.channels, name="alert-channels"),
    path("alerts/channels/<int:channel_id>/test/", views.channel_test, name="alert-channel-test"),
    path("alerts/act/<str:token>/", views.alert_action, name="alert-action"),
    path("alerts/<int:alert_id>/act/", views.alert_act_web, name="alert-act"),
    path("alerts/channels/new/", views.channel_edit, name="alert-channel-new"),
    path("alerts/channels/<int:channel_id>/edit/", views.channel_edit, name="alert-channel-edit"),
]
