from __future__ import annotations

from apps.ledger.pages import close

urlpatterns = [
    *close.urlpatterns,
]
