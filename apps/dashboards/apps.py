from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DashboardsConfig(AppConfig):
    name = "apps.dashboards"
    label = "dashboards"
    verbose_name = _("Engineering dashboards")
