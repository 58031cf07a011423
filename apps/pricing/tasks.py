from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def reprice_run(start: str, end: str) -> int:
    """Recompute costs of the days in [start, end) (ISO dates); resumes a run that stopped."""
    from datetime import date

    from apps.pricing.services import reprice_run

    run = reprice_run(start=date.fromisoformat(start), end=date.fromisoformat(end))
    return run.pk


@shared_task
def dirty_hours_price() -> int:
    """Price the hours whose tokens changed and the pool-hours that have ended."""
    from apps.pricing.services import dirty_hours_price

    return dirty_hours_price().hours


@shared_task
def pricelist_refresh() -> int:
    """Re-import COSTPLATFORM_PRICE_LIST (when set) from the next hour: the prices it changes."""
    from django.conf import settings

    from apps.pricing.pricelist import pricelist_refresh as refresh

    if not settings.PRICE_LIST:
        return 0
    return len(refresh(location=settings.PRICE_LIST, patterns=settings.PRICE_LIST_MODELS).changes)
