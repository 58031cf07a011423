"""The finance dashboard, built in apps.ledger.finance (kept here for its importers)."""

from __future__ import annotations

from apps.ledger.finance import TREND_MONTHS, Dashboard, dashboard_build

__all__ = ["TREND_MONTHS", "Dashboard", "dashboard_build"]
