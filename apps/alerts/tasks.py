"""Thin Celery entry points for alerts. Evaluation and delivery are separate tasks, so a
failed send never recomputes a detector; the retry policy of deliveries lives here."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings


@shared_task(ignore_result=True)
def notification_send(notification_id: int) -> None:
    """One delivery attempt; a retryable failure queues the next attempt after its backoff."""
    from apps.alerts.services import notification_send as send

    retry = send(notification_id=notification_id, retry_delays=settings.ALERTS_RETRY_DELAYS)
    if retry is not None:
        delay = settings.ALERTS_RETRY_DELAYS[retry.attempt - 2]
        notification_send.apply_async((retry.id,), countdown=delay)


@shared_task(ignore_result=True)
def notifications_due() -> None:
    """Sweep: attempts deferred by quiet hours, and any whose task message was lost."""
    from apps.alerts.services import notifications_due as due

    for notification_id in due():
        notification_send.delay(notification_id)


@shared_task(ignore_result=True)
def rules_evaluate() -> None:
    """Beat entry: one evaluation task per enabled rule, so a slow rule never delays the others."""
    from apps.alerts.evaluation import rules_due

    for rule_id in rules_due():
        rule_evaluate.apply_async((rule_id,), expires=settings.ALERTS_EVALUATE_EVERY)


@shared_task(ignore_result=True)
def rule_evaluate(rule_id: int) -> None:
    from apps.alerts.evaluation import rule_evaluate as evaluate

    evaluate(rule_id=rule_id)
