from __future__ import annotations

from apps.finance.pages import finance, sheets

urlpatterns = [*finance.urlpatterns, *sheets.urlpatterns]
