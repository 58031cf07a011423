"""Every periodic job, in one place. Each entry expires so a stalled beat never piles up work."""

from __future__ import annotations

from celery.schedules import crontab

HOUR = 3600

BEAT_SCHEDULE = {
    # Monthly record partitions exist two months ahead, so ingest never creates one on the hot path.
    "partitions-ensure-ahead": {
        "task": "apps.ingest.tasks.partitions_ensure_ahead",
        "schedule": crontab(minute=7, hour="*/6"),
        "options": {"expires": 6 * HOUR},
    },
}
