from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=60, max_retries=3)
def audit_month(month: str, broadcast: bool = True) -> int:
    """Audit a month (YYYY-MM), replacing its report; the summary goes to the channels once
    the report is committed. Returns the number of findings."""
    from django.db import transaction

    from apps.audits.services import audit_run
    from apps.common.buckets import parse_month

    report = audit_run(month=parse_month(month))
    if broadcast:
        transaction.on_commit(lambda: broadcast_report.delay(report.pk))
    return report.findings.count()


@shared_task
def audit_previous_month() -> int:
    """The beat job on the 1st: audit the month that just ended in the accounting zone."""
    from django.utils import timezone

    from apps.common.buckets import month_of, previous_month

    last_month = previous_month(month_of(timezone.now()))
    return audit_month(f"{last_month:%Y-%m}")


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def broadcast_report(report_id: int) -> int:
    """Write the report's chat messages (the alerts app delivers them); a report is sent once."""
    from apps.audits.services import report_broadcast

    return report_broadcast(report_id=report_id)
