from __future__ import annotations

from celery import shared_task


@shared_task
def daily_rollups_refresh(seconds: float = 50.0) -> int:
    """Rebuild the pages' daily rollups of the days with a changed hour that has ended, oldest
    first, for up to `seconds` (the day in progress once an hour, as its hours end)."""
    from apps.dashboards.rollup import refresh_stale

    return len(refresh_stale(seconds=seconds))
