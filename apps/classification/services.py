"""Writes of classification: rule sets (draft, edit, activate) and classifying a batch."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.accounts.models import CollectorKey
from apps.classification.engine import (
    BUILTIN_REASONS,
    DUPLICATE_WINDOW_SECONDS,
    FIRST_CUSTOM_REASON,
    Classifier,
    Move,
    Reasons,
)
from apps.classification.models import DirtyDay, Reason, Rule, RuleSet
from apps.classification.rules import attribute_accessor, compile_predicate, parse_rule

ONLY_DRAFTS = "Only a draft rule set can be edited; make a new draft from the active one."


class RuleSetNotEditable(ValueError):
    pass


def ruleset_draft_create(*, user: Any = None, name: str = "") -> RuleSet:
    """A new draft holding a copy of the active set's rules."""
    with transaction.atomic():
        active = RuleSet.objects.select_for_update().get(status=RuleSet.Status.ACTIVE)
        last = RuleSet.objects.order_by("-version").values_list("version", flat=True).first() or 0
        draft = RuleSet.objects.create(version=last + 1, name=name, created_by=user)
        Rule.objects.bulk_create(
            Rule(
                ruleset=draft,
                position=r.position,
                name=r.name,
                action=r.action,
                expression=r.expression,
                components=r.components,
                target=r.target,
                builtin=r.builtin,
            )
            for r in active.rules.all()
        )
    return draft


def rule_add(*, ruleset: RuleSet, **fields: Any) -> Rule:
    """Add a validated rule at the end of a draft (fields: name, action, expression,
    components, target, builtin). Raises django ValidationError with positions for bad rules."""
    if ruleset.status != RuleSet.Status.DRAFT:
        raise RuleSetNotEditable(ONLY_DRAFTS)
    last = ruleset.rules.order_by("-position").values_list("position", flat=True).first()
    rule = Rule(ruleset=ruleset, position=(last or 0) + 1, **fields)
    rule.full_clean()
    rule.save()
    return rule


def ruleset_activate(*, ruleset: RuleSet) -> RuleSet:
    """Make a draft the active set; the previous one is retired. New records are classified
    with it at once; `reclassify` applies it to history."""
    with transaction.atomic():
        current = RuleSet.objects.select_for_update().filter(status=RuleSet.Status.ACTIVE).first()
        ruleset = RuleSet.objects.select_for_update().get(pk=ruleset.pk)
        if ruleset.status != RuleSet.Status.DRAFT:
            raise RuleSetNotEditable("Only a draft can be activated.")
        for rule in ruleset.rules.all():
            rule.full_clean()
            if rule.action == Rule.Action.MOVE:
                reason_ensure(name=rule.target)
        if current is not None:
            current.status = RuleSet.Status.RETIRED
            current.save(update_fields=["status"])
        ruleset.status = RuleSet.Status.ACTIVE
        ruleset.activated_at = timezone.now()
        ruleset.save(update_fields=["status", "activated_at"])
    return ruleset


def reason_ensure(*, name: str) -> Reason:
    """The Reason row of a class.reason, creating a custom one (id >= 100) when new."""
    found = Reason.objects.filter(name=name).first()
    if found is not None:
        return found
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE classification_reason IN SHARE ROW EXCLUSIVE MODE")
        found = Reason.objects.filter(name=name).first()
        if found is None:
            top = Reason.objects.order_by("-id").values_list("id", flat=True).first() or 0
            found = Reason.objects.create(id=max(top + 1, FIRST_CUSTOM_REASON), name=name)
    return found


_classifiers: dict[tuple[int, str], Classifier] = {}


def classifier_build(*, ruleset: RuleSet, source_name: str) -> Classifier:
    """Compile a rule set for the records of one source (rules may test `source`)."""
    key = (ruleset.pk, source_name)
    cached = _classifiers.get(key) if ruleset.status != RuleSet.Status.DRAFT else None
    if cached is not None:
        return cached

    def accessor(path: str) -> Any:
        return (lambda record: source_name) if path == "source" else attribute_accessor(path)

    rules = list(ruleset.rules.all())
    reason_ids = dict(Reason.objects.filter(name__in=[r.target for r in rules]).values_list("name", "id"))
    moves = []
    for rule in rules:
        if rule.action == Rule.Action.MOVE:
            target = reason_ids.get(rule.target) or reason_ensure(name=rule.target).pk
            predicate = compile_predicate(parse_rule(rule.expression), accessor)
            moves.append(Move(rule.name, predicate, rule.component_ids(), target))
    disabled = frozenset(r.builtin for r in rules if r.action == Rule.Action.DISABLE)
    classifier = Classifier(ruleset_id=ruleset.pk, disabled=disabled, moves=tuple(moves))
    if ruleset.status != RuleSet.Status.DRAFT:
        if len(_classifiers) > 1000:
            _classifiers.clear()
        _classifiers[key] = classifier
    return classifier


def active_ruleset() -> RuleSet:
    """The active rule set; the built-in one (version 1) when none exists yet."""
    found = RuleSet.objects.filter(status=RuleSet.Status.ACTIVE).first()
    return found if found is not None else builtins_ensure()


def builtins_ensure() -> RuleSet:
    """The built-in reasons and, when no rule set is active, an active built-in set. The
    migrations seed the same; this keeps a database emptied by hand (or by tests) usable."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE classification_ruleset IN SHARE ROW EXCLUSIVE MODE")
        for pk, name in BUILTIN_REASONS.items():
            Reason.objects.get_or_create(pk=pk, defaults={"name": name, "builtin": True})
        active = RuleSet.objects.filter(status=RuleSet.Status.ACTIVE).first()
        if active is None:
            last = RuleSet.objects.order_by("-version").values_list("version", flat=True).first() or 0
            active = RuleSet.objects.create(
                version=last + 1, name="built-in rules", status=RuleSet.Status.ACTIVE, activated_at=timezone.now()
            )
    return active


@dataclass(frozen=True)
class Candidate:
    """What the duplicate rule needs of a record: its key and its time."""

    key: tuple[Any, ...]  # (prompt hash, model id, business line)
    ts: datetime


@dataclass(frozen=True)
class DuplicateScan:
    flags: list[bool]
    # Days holding stored records that a new, earlier record may have made duplicates of it.
    dirty_days: set[date]


def duplicates_find(*, source_id: int, batch: Sequence[Candidate | None]) -> DuplicateScan:
    """For each ok record of a batch (None for the others): does another ok record of the same
    source with the same prompt hash, model and business line have a ts in the window before
    it? Looks at the batch and the stored records, whatever order they arrived in."""
    window = timedelta(seconds=DUPLICATE_WINDOW_SECONDS)
    present = [c for c in batch if c is not None]
    if not present:
        return DuplicateScan([False] * len(batch), set())
    stored = _stored_candidates(source_id, present, window)
    times: dict[tuple[Any, ...], list[datetime]] = defaultdict(list)
    for c in (*present, *stored):
        times[c.key].append(c.ts)
    for values in times.values():
        values.sort()
    flags = []
    for candidate in batch:
        if candidate is None:
            flags.append(False)
            continue
        values = times[candidate.key]
        i = bisect.bisect_left(values, candidate.ts)  # the first ts not before this one
        flags.append(i > 0 and values[i - 1] >= candidate.ts - window)
    return DuplicateScan(flags, _days_made_dirty(present, stored, window))


def _days_made_dirty(present: list[Candidate], stored: list[Candidate], window: timedelta) -> set[date]:
    """Days of stored records that a new record lies in the window before: they may have
    become duplicates, which only a reclassification of their day can tell."""
    batch_times: dict[tuple[Any, ...], list[datetime]] = defaultdict(list)
    for c in present:
        batch_times[c.key].append(c.ts)
    for values in batch_times.values():
        values.sort()
    dirty = set()
    for s in stored:
        values = batch_times.get(s.key, [])
        i = bisect.bisect_left(values, s.ts)
        if i > 0 and values[i - 1] >= s.ts - window:
            dirty.add(s.ts.date())
    return dirty


def _stored_candidates(source_id: int, present: list[Candidate], window: timedelta) -> list[Candidate]:
    hashes = sorted({c.key[0] for c in present})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.prompt_hash, m.name, d.business_line, r.ts FROM ingest_record r "
            "JOIN ingest_dimset d ON d.id = r.dims_id JOIN ingest_servedmodel m ON m.id = r.model_id "
            "WHERE r.prompt_hash = ANY(%s) AND r.status = 0 AND r.source_id = %s AND r.ts >= %s AND r.ts <= %s",
            [hashes, source_id, min(c.ts for c in present) - window, max(c.ts for c in present) + window],
        )
        return [Candidate((bytes(h), name, bl), ts) for h, name, bl, ts in cursor.fetchall()]


def _candidate(record: Any) -> Candidate | None:
    if record.outcome.status != "ok" or not record.prompt_hash:
        return None
    key = (bytes.fromhex(record.prompt_hash), record.model, record.dims.get("business_line", ""))
    return Candidate(key, record.ts)


@dataclass(frozen=True)
class BatchClasses:
    ruleset_id: int
    reasons: list[Reasons]  # per record, the reason id of each token component
    dirty_days: set[date]


def batch_classify(*, source_id: int, records: Sequence[Any]) -> BatchClasses:
    """Classify a batch of records of one source with the active rule set."""
    source_name = CollectorKey.objects.values_list("name", flat=True).get(pk=source_id)
    classifier = classifier_build(ruleset=active_ruleset(), source_name=source_name)
    scan = duplicates_find(source_id=source_id, batch=[_candidate(r) for r in records])
    classify = classifier.classify
    reasons = [classify(r, duplicate=dup) for r, dup in zip(records, scan.flags, strict=True)]
    return BatchClasses(classifier.ruleset_id, reasons, scan.dirty_days)


def dirty_days_mark(*, days: Iterable[date]) -> None:
    DirtyDay.objects.bulk_create(
        [DirtyDay(day=day) for day in sorted(days)],
        update_conflicts=True,
        unique_fields=["day"],
        update_fields=["marked_at"],
    )
