"""Evaluation: run a rule's detector over its subjects and move each subject's state.

    ok ──fires──► firing ──stops──► resolved ──fires, after the cooldown──► firing …

A firing subject that keeps firing sends nothing more (deduplication) unless its level
rises (budget 80 % -> 100 %); a resolved subject that fires again within the rule's
cooldown stays resolved until the cooldown has passed (no flapping). Each transition
writes an Alert (the outbox, deduplicated by rule, subject, episode, status and level) and
routes it in the same transaction; delivery happens in other tasks and never recomputes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.alerts.detectors import DETECTORS, DetectionResult, Detector, Subject
from apps.alerts.models import Alert, AlertState, Rule, Severity
from apps.alerts.services import alert_route

log = logging.getLogger(__name__)
Status = AlertState.Status


@dataclass(frozen=True)
class Outcome:
    subject: Subject
    result: DetectionResult


def rule_detect(*, rule: Rule, now: datetime) -> list[Outcome]:
    """The detector's verdict on every subject of the rule (reads only)."""
    detector = DETECTORS[rule.detector]
    params = {**detector.defaults, **rule.params}
    found = detector.read(params=params, business_line=rule.business_line, now=now)
    return [Outcome(subject, _explained(subject, detector.detect(series, params))) for subject, series in found]


def _explained(subject: Subject, result: DetectionResult) -> DetectionResult:
    """A firing result with what a receiver reads beside the numbers: the window they were
    measured over and the top contributors of that window (read now, stored with the alert)."""
    if not result.firing:
        return result
    from apps.alerts.selectors import contributors_top

    figures = dict(result.figures)
    if subject.window is not None:
        figures["_window"] = [at.isoformat() for at in subject.window]
    top = contributors_top(subject=subject)
    if top:
        figures["_contributors"] = top
    if subject.dims:  # a team's or a caller's budget: the message names them in its language
        figures["_scope"] = dict(subject.dims)
    return replace(result, figures=figures)


def _alert(
    rule: Rule, state: AlertState, subject: Subject, status: str, result: DetectionResult, now: datetime
) -> Alert:
    severity = Severity.CRITICAL if result.critical else rule.severity
    figures = dict(result.figures)
    if state.fired_at is not None and status != Alert.Status.EVENT:
        figures["_since"] = state.fired_at.isoformat()
    return Alert(
        rule=rule,
        dedup_key=f"rule:{rule.id}:{state.subject}:{state.episode}:{status}:{state.level}",
        kind=rule.detector,
        status=status,
        severity=severity,
        business_line=subject.business_line,
        subject=subject.key,
        level=state.level,
        figures=figures,
        link=subject.link,
        suppressed="muted" if rule.is_muted(now) or state.is_muted(now) else "",
        created_at=now,
    )


def transition(*, rule: Rule, detector: Detector, state: AlertState, outcome: Outcome, now: datetime) -> Alert | None:
    """Move `state` (changed in place, not saved) for this outcome; the Alert to send, if any."""
    result = outcome.result
    if result.firing and state.status == Status.FIRING:
        if detector.rank(result.level) <= detector.rank(state.level):
            state.figures = result.figures
            return None  # still firing: deduplicated
        state.level = result.level
        return _alert(rule, state, outcome.subject, Alert.Status.FIRING, result, now)
    if result.firing:
        cooling = state.status == Status.RESOLVED and state.changed_at + rule.cooldown > now
        if cooling:
            return None
        state.status, state.level, state.episode = Status.FIRING, result.level, state.episode + 1
        state.changed_at = state.fired_at = now
        state.figures = result.figures
        return _alert(rule, state, outcome.subject, Alert.Status.FIRING, result, now)
    if state.status == Status.FIRING:
        state.status, state.changed_at = Status.RESOLVED, now
        figures = result.figures or state.figures
        resolved = DetectionResult(firing=False, figures=figures)
        return _alert(rule, state, outcome.subject, Alert.Status.RESOLVED, resolved, now)
    return None


def _events(rule: Rule, outcomes: list[Outcome], now: datetime) -> list[Alert]:
    alerts = []
    for outcome in outcomes:
        state = AlertState(rule=rule, subject=outcome.subject.key, episode=0)
        alert = _alert(rule, state, outcome.subject, Alert.Status.EVENT, outcome.result, now)
        alert.dedup_key = f"event:{rule.detector}:{outcome.subject.key}"
        alerts.append(alert)
    return alerts


def _save(alert: Alert) -> bool:
    try:
        with transaction.atomic():
            alert.save()
    except IntegrityError:
        return False  # the same transition was already written (dedup key)
    return True


@transaction.atomic
def _apply(rule_id: int, outcomes: list[Outcome], now: datetime) -> list[Alert]:
    # One evaluation of a rule writes at a time; the rule row is the lock (states follow it).
    rule = Rule.objects.select_for_update(no_key=True).get(id=rule_id)
    detector = DETECTORS[rule.detector]
    if detector.events:
        alerts = _events(rule, outcomes, now)
    else:
        alerts = _transitions(rule, detector, outcomes, now)
    sent = [alert for alert in alerts if _save(alert)]
    for alert in sent:
        if not alert.suppressed:
            alert_route(alert=alert, now=now)
    if detector.events and rule.detector == "ledger_finding":
        _findings_delivered(outcomes, now)
    Rule.objects.filter(id=rule.id).update(last_evaluated_at=now, last_error="")
    return sent


def _transitions(rule: Rule, detector: Detector, outcomes: list[Outcome], now: datetime) -> list[Alert]:
    states = {s.subject: s for s in AlertState.objects.filter(rule=rule).exclude(status=Status.OK)}
    seen = {o.subject.key for o in outcomes}
    # A firing subject that no longer appears in the data has stopped.
    gone = [
        Outcome(Subject(key=s.subject, business_line=rule.business_line), DetectionResult(firing=False))
        for key, s in states.items()
        if key not in seen and s.status == Status.FIRING
    ]
    alerts = []
    for outcome in [*outcomes, *gone]:
        state = states.get(outcome.subject.key)
        if state is None:
            if not outcome.result.firing:
                continue  # ok subjects have no row
            state = AlertState(rule=rule, subject=outcome.subject.key, changed_at=now)
        before = (state.status, state.level, state.episode, state.figures)
        alert = transition(rule=rule, detector=detector, state=state, outcome=outcome, now=now)
        if (state.status, state.level, state.episode, state.figures) != before or state.pk is None:
            state.save()
        if alert is not None:
            alerts.append(alert)
    return alerts


def _findings_delivered(outcomes: list[Outcome], now: datetime) -> None:
    from apps.ledger.models import Finding

    ids = [o.result.figures.get("_id") for o in outcomes]
    Finding.objects.filter(id__in=[i for i in ids if i is not None]).update(delivered_at=now)


def rule_evaluate(*, rule_id: int, now: datetime | None = None) -> list[Alert]:
    """Evaluate one rule now: detect (reads, no lock held), then apply the transitions and
    queue the alerts (one short transaction). Returns the alerts written."""
    now = now or timezone.now()
    rule = Rule.objects.get(id=rule_id)
    if not rule.enabled:
        return []
    try:
        outcomes = rule_detect(rule=rule, now=now)
    except Exception as exc:
        Rule.objects.filter(id=rule_id).update(last_error=f"{type(exc).__name__}: {exc}"[:1000])
        raise
    return _apply(rule_id, outcomes, now)


def rules_due(*, now: datetime | None = None) -> list[int]:
    """Enabled rules whose interval has passed (with a little slack for the beat's jitter)."""
    now = now or timezone.now()
    never = Q(last_evaluated_at__isnull=True)
    due = Q(last_evaluated_at__lte=now + timedelta(seconds=5) - F("every"))
    return list(Rule.objects.filter(never | due, enabled=True).order_by("id").values_list("id", flat=True))
