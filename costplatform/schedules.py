"""Every periodic job, in one place. Each entry expires so a stalled beat never piles up work."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from costplatform.env import envint

HOUR = 3600


def _entry(task: str, schedule: float | crontab, *, expires: float | None = None) -> dict[str, Any]:
    """A beat entry: `task` on `schedule`, its message dropped when no worker took it within
    `expires` seconds; by default an every-N-seconds entry's own period, so a stalled beat never
    queues a run behind the next one."""
    if expires is None:
        if not isinstance(schedule, float):
            raise TypeError(f"{task}: a crontab entry says when it expires")
        expires = schedule
    return {"task": task, "schedule": schedule, "options": {"expires": expires}}


BEAT_SCHEDULE = {
    # Monthly record partitions exist two months ahead, so ingest never creates one on the hot path.
    "partitions-ensure-ahead": _entry(
        "apps.ingest.tasks.partitions_ensure_ahead", crontab(minute=7, hour="*/6"), expires=6 * HOUR
    ),
    # Raw record partitions older than COSTPLATFORM_RETENTION_MONTHS are dropped whole; old rejections deleted.
    "ingest-retention": _entry("apps.ingest.tasks.retention_apply", crontab(minute=17, hour=3), expires=6 * HOUR),
    # Hours whose classified tokens changed, and pool-hours that ended, are priced within a minute.
    "pricing-price-dirty-hours": _entry("apps.pricing.tasks.dirty_hours_price", 60.0),
    # The hosted models' price list (COSTPLATFORM_PRICE_LIST, when set) re-imported once a day.
    "pricing-pricelist-refresh": _entry(
        "apps.pricing.tasks.pricelist_refresh", crontab(minute=23, hour=5), expires=6 * HOUR
    ),
    # Days where a late record may have made stored records duplicates (DirtyDay) are reclassified.
    "classification-reclassify-dirty-days": _entry("apps.classification.tasks.dirty_days_reclassify", 5 * 60.0),
    # Yesterday is recomputed once, so duplicates missed between concurrent batches are caught.
    "classification-yesterday-mark-dirty": _entry(
        "apps.classification.tasks.yesterday_mark_dirty", crontab(minute=30, hour=2), expires=6 * HOUR
    ),
    # The pages' daily rollups follow the hourly ones: days that changed are rebuilt within a minute.
    "dashboards-refresh-daily-rollups": _entry("apps.dashboards.tasks.daily_rollups_refresh", 60.0),
    # The ledger's journal follows the priced rows: recent days, dirty days and open months (idempotent).
    "ledger-accrue-recent": _entry("apps.ledger.tasks.recent_accrue", 5 * 60.0),
    # Every alert rule is evaluated, one task per rule (fan-out); a spike is seen within this period.
    "alerts-rules-evaluate": _entry(
        "apps.alerts.tasks.rules_evaluate", float(envint("COSTPLATFORM_ALERTS_EVALUATE_EVERY", 30))
    ),
    # Deliveries held by quiet hours, and any whose task message was lost, are sent when due.
    "alerts-notifications-due": _entry("apps.alerts.tasks.notifications_due", 60.0),
    # The monthly token audit of the month that just ended: hourly around the turn of the month
    # (the 1st of the accounting zone is the 28th to the 2nd in UTC); the task runs it once,
    # from 04:00 on the local 1st, and returns at once otherwise.
    "audits-previous-month": _entry(
        "apps.audits.tasks.previous_month_audit", crontab(minute=0, day_of_month="1,2,28-31"), expires=HOUR
    ),
}
