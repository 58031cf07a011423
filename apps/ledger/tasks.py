from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def range_accrue(start: str, end: str, force: bool = False) -> int:
    """Bring the journal of the months touching [start, end) (ISO dates) in line with the
    priced rows; closed months get adjusting entries. Idempotent."""
    from datetime import date

    from apps.ledger.services.accrual import range_accrue

    return sum(
        r.entries_written
        for r in range_accrue(start=date.fromisoformat(start), end=date.fromisoformat(end), force=force)
    )


@shared_task
def recent_accrue() -> int:
    """The beat job: accrue the recent days, the days marked dirty and the open months."""
    from apps.ledger.services.accrual import recent_accrue

    return sum(r.entries_written for r in recent_accrue())


@shared_task(acks_late=True)
def period_close(month: str, user_id: int | None = None) -> int:
    """Close a month (YYYY-MM); returns the number of findings."""
    from django.contrib.auth import get_user_model

    from apps.ledger.services.periods import parse_month, period_close

    user = get_user_model().objects.get(pk=user_id) if user_id is not None else None
    return len(period_close(month=parse_month(month), user=user).findings)
