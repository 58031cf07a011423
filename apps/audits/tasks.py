from __future__ import annotations

from celery import shared_task

AUDIT_LOCAL_HOUR = 4  # the monthly audit runs from this hour of the 1st, accounting zone


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=60, max_retries=3)
def audit_run(month: str, broadcast: bool = True) -> int:
    """Audit a month (YYYY-MM), replacing its report; the summary goes to the channels once
    the report is committed. Returns the number of findings."""
    from django.db import transaction

    from apps.audits.services import audit_run
    from apps.common.buckets import parse_month

    report = audit_run(month=parse_month(month))
    if broadcast:
        transaction.on_commit(lambda: report_broadcast.delay(report.pk))
    return report.findings.count()


@shared_task
def previous_month_audit() -> int:
    """The beat job: audit the month that just ended, once, from 04:00 on the 1st in the
    accounting zone (after late records and pricing settle). The beat calls it every hour
    around the turn of the month, since that hour is another UTC day in every zone."""
    from django.utils import timezone

    from apps.audits.models import AuditReport
    from apps.common.buckets import accounting_zone, month_of, previous_month

    local = timezone.now().astimezone(accounting_zone())
    last_month = previous_month(month_of(local.date()))
    if local.day != 1 or local.hour < AUDIT_LOCAL_HOUR or AuditReport.objects.filter(month=last_month).exists():
        return 0
    return audit_run(f"{last_month:%Y-%m}")


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def report_broadcast(report_id: int) -> int:
    """Write the report's chat messages (the alerts app delivers them); a report is sent once."""
    from apps.audits.services import report_broadcast

    return report_broadcast(report_id=report_id)
