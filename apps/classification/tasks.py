from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def reclassify_run(start: str, end: str, ruleset_version: int | None = None) -> int:
    """Reclassify the days in [start, end) (ISO dates) with the active rule set (or the given
    version); resumes a run that stopped."""
    from datetime import date

    from apps.classification.models import RuleSet
    from apps.classification.services import reclassify_run

    ruleset = RuleSet.objects.get(version=ruleset_version) if ruleset_version is not None else None
    run = reclassify_run(start=date.fromisoformat(start), end=date.fromisoformat(end), ruleset=ruleset)
    return run.pk


@shared_task
def dirty_days_reclassify() -> int:
    """Reclassify the days where late records may have made stored ones duplicates."""
    from apps.classification.services import dirty_days_reclassify

    return len(dirty_days_reclassify())


@shared_task
def yesterday_mark_dirty() -> None:
    """Mark yesterday for reclassification. Two batches of one source stored at the same moment
    do not see each other's records, so a duplicate between them can be missed at ingest; the
    nightly recompute makes every finished day exact."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.classification.services import dirty_days_mark

    dirty_days_mark(days=[timezone.now().date() - timedelta(days=1)])
