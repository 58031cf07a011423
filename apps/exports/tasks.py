from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def month_export(month: str, to: str = "") -> list[str]:
    """Write a month's Parquet files (to `to`, else COSTPLATFORM_WAREHOUSE_EXPORT_TO); queued
    after each close. Idempotent: a run replaces the month's files."""
    from django.conf import settings

    from apps.common.buckets import parse_month
    from apps.exports.warehouse import month_export

    written = month_export(month=parse_month(month), to=to or settings.WAREHOUSE_EXPORT_TO)
    return [w.location for w in written]
