from __future__ import annotations

from django.urls import path

from apps.audits.views import report_list, report_page

urlpatterns = [
    path("audits/", report_list, name="audits"),
    path("audits/<str:month>/", report_page, name="audit-report"),
]
