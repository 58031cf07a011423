from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DashboardsConfig(AppConfig):
    name = "apps.dashboards"
    label = "dashboards"
    verbose_name = _("Engineering dashboards")

    def ready(self) -> None:
        from django.urls import reverse

        from apps.ledger.links import page_link_register

        # The books link a cost to the usage behind it: the waste page, filtered.
        page_link_register("usage", lambda: reverse("dashboards:waste"))
