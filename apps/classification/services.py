"""Writes of classification: rule sets (draft, edit, activate), classifying a batch at ingest,
and reclassifying stored records a day at a time."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.utils import timezone

from apps.accounts.models import CollectorKey
from apps.classification.engine import (
    BUILTIN_REASONS,
    COMPONENTS,
    DUPLICATE_WINDOW_SECONDS,
    FIRST_CUSTOM_REASON,
    Classifier,
    Move,
    Reasons,
)
from apps.classification.models import DirtyDay, Reason, Rule, RuleSet
from apps.classification.rules import Node, attribute_accessor, compile_predicate, parse_rule
from apps.classification.sql import CLASS_ROLLUP, MoveRule, RuleSetSql, moves_sql, reclassify_insert_sql, ruleset_sql
from apps.common.buckets import rollup_day_start, rollup_days
from apps.common.composed import SQL, table, text
from apps.common.dayrun import Progress, RunBusy, jobrun_run
from apps.common.db import bound_cursor, xact_lock, xact_locks_shared
from apps.common.markrun import Clear, MarkConsumer
from apps.common.models import JobRun
from apps.common.rollup import Marks
from apps.ingest.models import DimSet, Record, ServedModel
from apps.ingest.retention import RecordsGone, records_available_check, records_gone

ONLY_DRAFTS = "Only a draft rule set can be edited; make a new draft from the active one."


class RuleSetNotEditable(ValueError):
    pass


# Writers of the reasons and rule sets take their table's lock first: one creates a custom reason
# or the built-in set at a time. Reclassifying a day reads the records before it writes the rollup.
_LOCK_REASONS = text(SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(table(Reason)))
_LOCK_RULESETS = text(SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(table(RuleSet)))
_LOCK_RECORDS = text(SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(table(Record)))
_CLASS_CLEAR = text(CLASS_ROLLUP.clear())


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
            cursor.execute(_LOCK_REASONS)
        found = Reason.objects.filter(name=name).first()
        if found is None:
            top = Reason.objects.order_by("-id").values_list("id", flat=True).first() or 0
            found = Reason.objects.create(id=max(top + 1, FIRST_CUSTOM_REASON), name=name)
    return found


@dataclass(frozen=True)
class MoveSpec:
    """A move rule of a rule set, parsed: compiled to Python at ingest, to SQL to reclassify."""

    name: str
    tree: Node
    components: tuple[int, ...]
    target: str


@dataclass(frozen=True)
class RuleSetParts:
    disabled: frozenset[str]
    moves: tuple[MoveSpec, ...]


def ruleset_parts(*, ruleset: RuleSet) -> RuleSetParts:
    """A rule set's disabled built-ins and its move rules in order, parsed and checked."""
    rules = list(ruleset.rules.all())
    moves = tuple(
        MoveSpec(rule.name, parse_rule(rule.expression), rule.component_ids(), rule.target)
        for rule in rules
        if rule.action == Rule.Action.MOVE
    )
    return RuleSetParts(frozenset(r.builtin for r in rules if r.action == Rule.Action.DISABLE), moves)


def _reason_ids(parts: RuleSetParts) -> dict[str, int]:
    """The ids of the move targets, making the custom reasons that do not exist yet."""
    targets = {move.target for move in parts.moves}
    ids = dict(Reason.objects.filter(name__in=targets).values_list("name", "id"))
    return ids | {name: reason_ensure(name=name).pk for name in sorted(targets - ids.keys())}


_classifiers: dict[tuple[int, str], Classifier] = {}


def classifier_build(*, ruleset: RuleSet, source_name: str) -> Classifier:
    """Compile a rule set for the records of one source (rules may test `source`)."""
    key = (ruleset.pk, source_name)
    cached = _classifiers.get(key) if ruleset.status != RuleSet.Status.DRAFT else None
    if cached is not None:
        return cached

    def accessor(path: str) -> Any:
        return (lambda record: source_name) if path == "source" else attribute_accessor(path)

    parts = ruleset_parts(ruleset=ruleset)
    reason_ids = _reason_ids(parts)
    moves = [
        Move(move.name, compile_predicate(move.tree, accessor), move.components, reason_ids[move.target])
        for move in parts.moves
    ]
    classifier = Classifier(ruleset_id=ruleset.pk, disabled=parts.disabled, moves=tuple(moves))
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
            cursor.execute(_LOCK_RULESETS)
        for pk, name in BUILTIN_REASONS.items():
            Reason.objects.get_or_create(pk=pk, defaults={"name": name, "builtin": True})
        active = RuleSet.objects.filter(status=RuleSet.Status.ACTIVE).first()
        if active is None:
            last = RuleSet.objects.order_by("-version").values_list("version", flat=True).first() or 0
            active = RuleSet.objects.create(
                version=last + 1, name="built-in rules", status=RuleSet.Status.ACTIVE, activated_at=timezone.now()
            )
    return active


class Candidate(NamedTuple):
    """What the duplicate rule needs of a record: its key and its time (a tuple: one is made
    for every record of a batch and every stored record it is compared with)."""

    key: tuple[Any, ...]  # (prompt hash, model name, business line)
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
    dirty = []
    for s in stored:
        values = batch_times.get(s.key, [])
        i = bisect.bisect_left(values, s.ts)
        if i > 0 and values[i - 1] >= s.ts - window:
            dirty.append(s.ts)
    return rollup_days(dirty)


# One probe of the (prompt_hash, ts) index per hash (migration ingest 0007), the window part of
# its index condition, so a hot hash costs only its records in the window. OFFSET 0 keeps the
# subquery a per-hash probe (the planner may not flatten it): given the hashes as one array, the
# planner reads the primary key's range over the whole window whenever the statistics of a
# growing partition put few rows in it (1 s a batch at 900,000 records in the window), or, with
# a hash index, ANDed the two. The model and business line are looked up by primary key per row
# found, a plan that does not depend on estimates. JIT is off: the row estimates of a growing
# partition put the statement's cost above the JIT threshold, and compiling it took 430 ms of a
# 25 ms query at 15 million records.
_STORED_CANDIDATES = text(
    SQL("""
SELECT r.prompt_hash,
       (SELECT m.name FROM {models} m WHERE m.id = r.model_id),
       (SELECT d.business_line FROM {dims} d WHERE d.id = r.dims_id),
       r.ts
FROM unnest(%b::bytea[]) AS h(hash)
CROSS JOIN LATERAL (
    SELECT prompt_hash, model_id, dims_id, ts FROM {records}
    WHERE prompt_hash = h.hash AND status = 0 AND source_id = %b::int AND ts >= %b AND ts <= %b
    OFFSET 0
) r
""").format(models=table(ServedModel), dims=table(DimSet), records=table(Record))
)


def _stored_candidates(source_id: int, present: list[Candidate], window: timedelta) -> list[Candidate]:
    hashes = sorted({c.key[0] for c in present})
    # Bound server side: the ~3,000 hashes of a batch quoted into the SQL text cost more than the query.
    with transaction.atomic(), bound_cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(
            _STORED_CANDIDATES,
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


# The active rule set's id and the source's name in one round trip: a batch's classifier is
# then mostly the one compiled for them before (classifier_build's cache).
_ACTIVE_AND_SOURCE = text(
    SQL("""
SELECT (SELECT id FROM {rulesets} WHERE status = %s),
       (SELECT name FROM {keys} WHERE id = %s)
""").format(rulesets=table(RuleSet), keys=table(CollectorKey))
)


def batch_classifier(*, source_id: int) -> Classifier:
    """The active rule set compiled for the records of one source."""
    with connection.cursor() as cursor:
        cursor.execute(_ACTIVE_AND_SOURCE, [RuleSet.Status.ACTIVE, source_id])
        ruleset_id, source_name = cursor.fetchone()
    if source_name is None:
        raise CollectorKey.DoesNotExist(f"no collector key {source_id}")
    cached = _classifiers.get((ruleset_id, source_name)) if ruleset_id is not None else None
    return cached or classifier_build(ruleset=active_ruleset(), source_name=source_name)


def batch_classify(*, source_id: int, records: Sequence[Any]) -> BatchClasses:
    """Classify a batch of records of one source with the active rule set."""
    classifier = batch_classifier(source_id=source_id)
    scan = duplicates_find(source_id=source_id, batch=[_candidate(r) for r in records])
    classify = classifier.classify
    reasons = [classify(r, duplicate=dup) for r, dup in zip(records, scan.flags, strict=True)]
    return BatchClasses(classifier.ruleset_id, reasons, scan.dirty_days)


# The days to reclassify (UTC dates), one row a day: marked in an ingest batch's transaction by
# dirty_days_mark, read by dirty_days_reclassify and cleared by reclassify_day.
DIRTY = Marks(DirtyDay._meta.db_table, "day", type="date", keyed=True)
_MARK_DAYS = text(DIRTY.mark())
_DIRTY_CLEAR = text(DIRTY.clear())


def dirty_days_mark(*, days: Iterable[date]) -> None:
    """Mark days a late record may have changed (in day order, as every batch marks them)."""
    distinct = sorted(set(days))
    if distinct:
        with connection.cursor() as cursor:
            cursor.execute(_MARK_DAYS, [distinct])


def dirty_days_clear(*, days: Iterable[date]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_DIRTY_CLEAR, [sorted(set(days))])


# --- reclassification -------------------------------------------------------------------------

DAY = timedelta(days=1)
# Advisory lock key: (namespace, day ordinal), a day's class rollup (UTC day): held by its
# reclassification alone, shared by the ingest batches that add to it or mark it dirty.
_DAY_LOCK = 0x434C4459
NOT_A_DRAFT = "A draft cannot classify stored records: it may still change. Activate it first."
RUN_KIND = "reclassify"  # JobRun.kind of reclassify runs; their key is the rule set id
RECLASSIFY_WORKERS = 2  # days reclassified at once (each its own transaction and connection)


class ReclassifyError(ValueError):
    pass


ReclassifyBusy = RunBusy  # the run's lock is held: another process is running it


def ruleset_compiled(
    ruleset: RuleSet, *, prefix: str = "", reason_id: Callable[[str], int] | None = None
) -> RuleSetSql:
    """The SQL of `ruleset`'s reasons (classification.sql.RuleSetSql) with the reason ids of its
    moves: what reclassification, a rule set's try and the record pages' classification run."""
    parts = ruleset_parts(ruleset=ruleset)
    ids = reason_id or _reason_ids(parts).__getitem__
    moves = [MoveRule(move.tree, move.components, ids(move.target)) for move in parts.moves]
    return ruleset_sql(disabled=parts.disabled, moves=moves, prefix=prefix)


def days_lock_shared(*, days: Iterable[date]) -> None:
    """In an ingest batch's transaction, before it takes any other lock: hold these days' rollup
    locks shared (in day order, as every batch takes them), waiting for a reclassification of
    any of them in flight; one of them starting later waits for the batch to commit."""
    ordinals = sorted(day.toordinal() for day in set(days))
    if ordinals:
        with connection.cursor() as cursor:
            xact_locks_shared(cursor, _DAY_LOCK, ordinals)


def reclassify_day(*, day: date, ruleset: RuleSet) -> int:
    """Replace a day's class rollup (every rule set's rows) by the day's records classified with
    `ruleset`, in one transaction and one INSERT ... SELECT, and clear the day's DirtyDay row
    (pricing's trigger on the rollup notes the hours whose rows changed). Returns the number of rollup rows written.

    Ingest adds to the same rows in its own transactions; the day's lock, which every batch of
    the day holds shared (days_lock_shared), waits for those in flight (their records are then
    visible to the recompute) and holds new ones back until this commits (their records were not
    seen: they add to the new rows). Batches of other days, and the reclassification of other
    days, go on meanwhile.
    """
    if ruleset.status == RuleSet.Status.DRAFT:
        raise ReclassifyError(NOT_A_DRAFT)
    _records_present(day, day + DAY)
    start = rollup_day_start(day)
    statement, params = reclassify_insert_sql(
        compiled=ruleset_compiled(ruleset), ruleset_id=ruleset.pk, start=start, end=start + DAY
    )
    with transaction.atomic(), connection.cursor() as cursor:
        xact_lock(cursor, _DAY_LOCK, day.toordinal())
        # The records before the rollup: ingest holds them in that order when it makes a partition.
        cursor.execute(_LOCK_RECORDS)
        cursor.execute("SET LOCAL work_mem = '64MB'")  # the day's sorts in memory: the lock is held less
        # The statement's cost makes PostgreSQL compile and optimise it with LLVM, which takes
        # longer (about 0.3 s a day) than the compiled expressions save on one day of records.
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(_CLASS_CLEAR, [start, start + DAY])
        cursor.execute(text(statement), params)
        written = cursor.rowcount
        cursor.execute(_DIRTY_CLEAR, [[day]])
    return written


def reclassify_run(
    *, start: date, end: date, ruleset: RuleSet | None = None, progress: Progress | None = None
) -> JobRun:
    """Reclassify the days in [start, end) with `ruleset` (the active one by default), a day per
    transaction, RECLASSIFY_WORKERS days at once, through the resumable runner
    (apps.common.dayrun; the days commit in order): after a crash the same call
    resumes at the first day not done; once a run is done, the same call starts a new one (and
    gives the same result). The run's key is the rule set's id."""
    if end <= start:
        raise ReclassifyError("end must be after start")
    ruleset = ruleset or active_ruleset()
    if ruleset.status == RuleSet.Status.DRAFT:
        raise ReclassifyError(NOT_A_DRAFT)
    _records_present(start, end)
    chosen = ruleset  # bound for the closure (mypy: no longer optional)

    def work(day: date) -> None:
        reclassify_day(day=day, ruleset=chosen)

    return jobrun_run(
        kind=RUN_KIND,
        key=str(ruleset.pk),
        start=start,
        end=end,
        work=work,
        progress=progress,
        workers=RECLASSIFY_WORKERS,
    )


def _records_present(start: date, end: date) -> None:
    """Reclassifying a day replaces its rollup by its records: refuse days whose records are gone."""
    try:
        records_available_check(start=start, end=end, what="Reclassification")
    except RecordsGone as exc:
        raise ReclassifyError(str(exc)) from exc


@dataclass
class DirtyDays(MarkConsumer[date, int]):
    """The days a late record may have changed, reclassified with the active rule set (loaded
    once a day is due). reclassify_day is a day's transaction, as in a range run: it compiles the
    rule set before it takes the day's lock (held less) and clears the day's mark. A day whose
    records retention dropped is cleared without work: its rollup stays as it is."""

    marks = DIRTY
    clear = Clear.WORK
    atomic = False
    ruleset: RuleSet | None = None

    def dropped(self, units: list[date]) -> list[date]:
        return [day for day in units if records_gone(start=day, end=day + DAY)]

    def begin(self, units: list[date]) -> None:
        self.ruleset = active_ruleset()

    def work(self, unit: date, values: list[date]) -> int:
        assert self.ruleset is not None
        return reclassify_day(day=unit, ruleset=self.ruleset)


def dirty_days_reclassify(*, max_days: int = 7) -> list[date]:
    """Reclassify, with the active rule set, the days a late record may have changed (DirtyDay),
    oldest first, at most `max_days` per call (the rest on the next call)."""
    return DirtyDays().run(limit=max_days).units


class ReasonMove(NamedTuple):
    component: str
    from_reason: str
    to_reason: str
    tokens: int


def ruleset_try(*, ruleset: RuleSet, start: datetime | None = None, end: datetime | None = None) -> list[ReasonMove]:
    """The tokens that would move from one class.reason to another if `ruleset` (usually a draft)
    replaced the active set, over the records with ts in [start, end) (by default the last 24 h):
    both sets evaluated side by side in one query, most tokens first. Writes nothing: a target
    reason that does not exist yet is named, not created."""
    end = end or timezone.now()
    start = start or end - DAY
    names = dict(Reason.objects.values_list("id", "name"))
    ids = {name: pk for pk, name in names.items()}

    def reason_id(name: str) -> int:
        if name not in ids:  # a stand-in id for a reason not made yet
            stand_in = -1 - len(names)
            ids[name], names[stand_in] = stand_in, name
        return ids[name]

    before = ruleset_compiled(active_ruleset(), prefix="a_", reason_id=reason_id)
    after = ruleset_compiled(ruleset, prefix="b_", reason_id=reason_id)
    statement, params = moves_sql(before=before, after=after, start=start, end=end)
    with transaction.atomic(), connection.cursor() as cursor:
        # A try is asked for once and read at once: compiling it (JIT) costs more than it saves.
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(text(statement), params)
        rows = cursor.fetchall()
    moves = [ReasonMove(COMPONENTS[c], names[a], names[b], int(n)) for c, a, b, n in rows]
    return sorted(moves, key=lambda m: (-m.tokens, COMPONENTS.index(m.component), m.from_reason, m.to_reason))
