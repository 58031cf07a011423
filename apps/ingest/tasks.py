from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def partitions_ensure_ahead() -> list[str]:
    """Create this month's record partition and the next ones ahead of need."""
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from apps.ingest.partitions import partitions_ensure_ahead as ensure

    with transaction.atomic():
        return ensure(today=timezone.now().date(), months_ahead=settings.PARTITIONS_AHEAD_MONTHS)


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def retention_apply() -> dict[str, int]:
    """Drop the record partitions older than the retention horizon; delete old rejections."""
    from django.utils import timezone

    from apps.ingest.retention import partitions_drop_expired, rejections_delete_expired

    now = timezone.now()
    dropped = partitions_drop_expired(today=now.date())
    return {
        "partitions": len(dropped),
        "records": sum(d.records for d in dropped),
        "rejections": rejections_delete_expired(now=now),
    }
