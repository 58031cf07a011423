"""Every periodic job, in one place. Each entry expires so a stalled beat never piles up work."""

from __future__ import annotations

from celery.schedules import crontab

from costplatform.env import envint

HOUR = 3600

BEAT_SCHEDULE = {
    # Monthly record partitions exist two months ahead, so ingest never creates one on the hot path.
    "partitions-ensure-ahead": {
        "task": "apps.ingest.tasks.partitions_ensure_ahead",
        "schedule": crontab(minute=7, hour="*/6"),
        "options": {"expires": 6 * HOUR},
    },
    # Raw record partitions older than COSTPLATFORM_RETENTION_MONTHS are dropped whole; old rejections deleted.
    "ingest-retention": {
        "task": "apps.ingest.tasks.retention_apply",
        "schedule": crontab(minute=17, hour=3),
        "options": {"expires": 6 * HOUR},
    },
    # Hours whose classified tokens changed, and pool-hours that ended, are priced within a minute.
    "pricing-price-dirty-hours": {
        "task": "apps.pricing.tasks.dirty_hours_price",
        "schedule": 60.0,
        "options": {"expires": 60},
    },
    # The hosted models' price list (COSTPLATFORM_PRICE_LIST, when set) re-imported once a day.
    "pricing-pricelist-refresh": {
        "task": "apps.pricing.tasks.pricelist_refresh",
        "schedule": crontab(minute=23, hour=5),
        "options": {"expires": 6 * HOUR},
    },
    # Days where a late record may have made stored records duplicates (DirtyDay) are reclassified.
    "classification-reclassify-dirty-days": {
        "task": "apps.classification.tasks.dirty_days_reclassify",
        "schedule": 5 * 60.0,
        "options": {"expires": 5 * 60},
    },
    # Yesterday is recomputed once, so duplicates missed between concurrent batches are caught.
    "classification-yesterday-mark-dirty": {
        "task": "apps.classification.tasks.yesterday_mark_dirty",
        "schedule": crontab(minute=30, hour=2),
        "options": {"expires": 6 * HOUR},
    },
    # The pages' daily rollups follow the hourly ones: days that changed are rebuilt within a minute.
    "dashboards-refresh-daily-rollups": {
        "task": "apps.dashboards.tasks.daily_rollups_refresh",
        "schedule": 60.0,
        "options": {"expires": 60},
    },
    # The ledger's journal follows the priced rows: recent days, dirty days and open months (idempotent).
    "ledger-accrue-recent": {
        "task": "apps.ledger.tasks.recent_accrue",
        "schedule": 5 * 60.0,
        "options": {"expires": 5 * 60},
    },
    # Every alert rule is evaluated, one task per rule (fan-out); a spike is seen within this period.
    "alerts-rules-evaluate": {
        "task": "apps.alerts.tasks.rules_evaluate",
        "schedule": float(envint("COSTPLATFORM_ALERTS_EVALUATE_EVERY", 30)),
        "options": {"expires": envint("COSTPLATFORM_ALERTS_EVALUATE_EVERY", 30)},
    },
    # Deliveries held by quiet hours, and any whose task message was lost, are sent when due.
    "alerts-notifications-due": {
        "task": "apps.alerts.tasks.notifications_due",
        "schedule": 60.0,
        "options": {"expires": 60},
    },
    # The monthly token audit of the month that just ended: hourly around the turn of the month
    # (the 1st of the accounting zone is the 28th to the 2nd in UTC); the task runs it once,
    # from 04:00 on the local 1st, and returns at once otherwise.
    "audits-previous-month": {
        "task": "apps.audits.tasks.previous_month_audit",
        "schedule": crontab(minute=0, day_of_month="1,2,28-31"),
        "options": {"expires": HOUR},
    },
}
