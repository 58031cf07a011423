"""reclassify: a day per transaction, resumable, the same result on a rerun; the beat job for
dirty days; trying a draft's rules on recent records; and ingest running alongside."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.db.models import Sum

from apps.classification import services, tasks
from apps.classification.models import DirtyDay, HourlyClass, Reason, RuleSet
from apps.classification.services import (
    ReasonMove,
    ReclassifyError,
    active_ruleset,
    reclassify_day,
    reclassify_run,
    rule_add,
    ruleset_draft_create,
    ruleset_try,
)
from apps.common.models import JobRun
from apps.pricing.models import DirtyHour
from tests.classification.helpers import ruleset_activated, snapshot, store
from tests.factories import collector_key, record

pytestmark = pytest.mark.django_db
DAY1 = datetime(2025, 3, 10, tzinfo=UTC)
START, END = DAY1.date(), DAY1.date() + timedelta(days=3)
HASH = "ab" * 16


def plain(ts: datetime, **overrides: Any) -> dict[str, Any]:
    base = {"tokens.system": 0, "tokens.tool": 0, "tokens.prompt": 1000, "tokens.prompt_cached": 600}
    return record(**{**base, "tokens.completion": 200, "prompt_hash": HASH, "ts": ts.isoformat(), **overrides})


def classes(**filters: Any) -> dict[str, int]:
    rows = HourlyClass.objects.filter(**filters).values("reason__name").annotate(n=Sum("tokens"))
    return {row["reason__name"]: row["n"] for row in rows}


@pytest.fixture
def source() -> int:
    return collector_key("vllm-eu").key.pk


@pytest.fixture
def three_days(source: int) -> None:
    for day in range(3):
        at = DAY1 + timedelta(days=day, hours=9)
        store(
            source,
            [
                plain(at, dims={"business_line": "search", "team": "a"}),
                plain(at + timedelta(seconds=30), dims={"business_line": "search", "team": "b"}),
                plain(at, prompt_hash="cd" * 16, **{"outcome.status": "timeout", "outcome.finish_reason": None}),
                plain(at + timedelta(hours=14), **{"outcome.finish_reason": "length", "tokens.padding": day + 1}),
            ],
        )


def test_it_replaces_a_day_with_the_active_rule_set_and_marks_its_hours_for_pricing(three_days: None) -> None:
    before = snapshot()
    DirtyHour.objects.all().delete()
    v2 = ruleset_activated(moves=[('dims.team == "b"', "completion", "waste.team_b")], disabled=["prefix_cache"])

    written = reclassify_day(day=START, ruleset=v2)

    day1 = {"hour__gte": DAY1, "hour__lt": DAY1 + timedelta(days=1)}
    assert written == HourlyClass.objects.filter(**day1).count()
    assert set(HourlyClass.objects.filter(**day1).values_list("ruleset", flat=True)) == {v2.pk}
    assert classes(**day1) == {
        "effective.input": 1000 + 1000,  # the cached prompt follows the prompt now
        "waste.duplicate": 1000,  # team b repeats team a's prompt 30 s later: its prompt, cached part too
        "waste.team_b": 200,  # and a move takes its completion
        "waste.timeout": 1200,
        "effective.output": 200,
        "waste.truncated": 200,
        "waste.padding": 1,
    }
    assert {k: n for k, n in snapshot().items() if k[0] >= DAY1 + timedelta(days=1)} == {
        k: n for k, n in before.items() if k[0] >= DAY1 + timedelta(days=1)
    }
    # Pricing's trigger on the class rollup notes the hours whose rows the day's rewrite touched.
    assert sorted(set(DirtyHour.objects.values_list("hour", flat=True))) == [DAY1 + timedelta(hours=h) for h in (9, 23)]


def test_a_draft_cannot_reclassify(three_days: None) -> None:
    with pytest.raises(ReclassifyError, match="draft"):
        reclassify_run(start=START, end=END, ruleset=ruleset_draft_create())


def test_it_resumes_after_a_crash_and_matches_a_clean_run(three_days: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ruleset_activated(moves=[('dims.team == "a"', "all", "shadow.team_a")])
    reclassify_run(start=START, end=END)
    clean = snapshot()
    HourlyClass.objects.all().delete()

    real = services.reclassify_day
    calls: list[date] = []

    def crash_on_day_two(*, day: date, **kwargs: Any) -> int:
        calls.append(day)
        if day == START + timedelta(days=1) and calls.count(day) == 1:
            raise RuntimeError("worker killed")
        return real(day=day, **kwargs)

    monkeypatch.setattr(services, "reclassify_day", crash_on_day_two)
    with pytest.raises(RuntimeError):
        reclassify_run(start=START, end=END)
    run = JobRun.objects.get(kind=services.RUN_KIND, status=JobRun.Status.FAILED)
    assert run.next_day == START + timedelta(days=1) and "worker killed" in run.error
    assert {key[0].date() for key in snapshot()} == {START}  # day one committed, nothing of day two

    resumed = reclassify_run(start=START, end=END)

    assert resumed.pk == run.pk and resumed.status == JobRun.Status.DONE
    assert calls == [START, START + timedelta(days=1), START + timedelta(days=1), START + timedelta(days=2)]
    assert snapshot() == clean


def test_a_rerun_of_a_done_range_gives_the_same_result(three_days: None) -> None:
    first = reclassify_run(start=START, end=END)
    before = snapshot()

    second = reclassify_run(start=START, end=END)

    assert second.pk != first.pk and second.status == JobRun.Status.DONE
    assert snapshot() == before
    assert len({key[0] for key in before}) == 3 * 2  # 09:00 and 23:00 of each day


def test_the_command_shows_progress_and_clear_errors(three_days: None) -> None:
    out = io.StringIO()
    call_command("reclassify", "--from", "2025-03-10", "--to", "2025-03-13", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        "reclassified 2025-03-10 (1/3)",
        "reclassified 2025-03-11 (2/3)",
        "reclassified 2025-03-12 (3/3)",
    ]
    assert f"reclassified 2025-03-10 .. 2025-03-13 (exclusive) with rule set v{active_ruleset().version}" in lines[3]
    with pytest.raises(CommandError, match="end must be after start"):
        call_command("reclassify", "--from", "2025-03-10", "--to", "2025-03-10")
    with pytest.raises(CommandError, match="no rule set with version 999"):
        call_command("reclassify", "--from", "2025-03-10", "--to", "2025-03-11", "--ruleset", "999")


def test_an_older_version_can_be_applied_by_number(three_days: None) -> None:
    v1 = active_ruleset()
    ruleset_activated(moves=[('dims.team == "a"', "all", "shadow.team_a")])
    call_command(
        "reclassify", "--from", "2025-03-10", "--to", "2025-03-13", "--ruleset", str(v1.version), stdout=io.StringIO()
    )
    assert set(HourlyClass.objects.values_list("ruleset", flat=True)) == {v1.pk}
    assert RuleSet.objects.get(pk=v1.pk).status == RuleSet.Status.RETIRED


def test_the_celery_task_runs_a_range(three_days: None) -> None:
    run_id = tasks.reclassify_run.apply(args=["2025-03-10", "2025-03-13"]).get()
    assert JobRun.objects.get(pk=run_id).status == JobRun.Status.DONE


def test_the_beat_task_reclassifies_the_days_a_late_record_made_dirty(source: int) -> None:
    at = DAY1 + timedelta(days=1, minutes=2)
    store(source, [plain(at)])
    store(source, [plain(at - timedelta(minutes=4))])  # arrives late, 4 minutes earlier: yesterday
    assert set(DirtyDay.objects.values_list("day", flat=True)) == {at.date()}
    assert "waste.duplicate" not in classes()
    DirtyHour.objects.all().delete()

    assert tasks.dirty_days_reclassify.apply().get() == 1

    assert classes()["waste.duplicate"] == 1000 + 200 - 600  # the later record's uncached prompt and output
    assert not DirtyDay.objects.exists()
    assert DirtyHour.objects.filter(hour=at.replace(minute=0)).exists()
    assert tasks.dirty_days_reclassify.apply().get() == 0


def test_trying_a_draft_counts_the_tokens_that_would_move_and_writes_nothing(source: int) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    store(
        source,
        [
            plain(now - timedelta(hours=2), dims={"feature": "summary"}),
            plain(now - timedelta(hours=2), dims={"feature": "faq"}, prompt_hash="cd" * 16),
            plain(now - timedelta(hours=1), **{"outcome.status": "error", "outcome.finish_reason": None}),
            plain(now - timedelta(hours=30), dims={"feature": "summary"}),  # not in the last 24 h
        ],
    )
    draft = ruleset_draft_create()
    rule_add(
        ruleset=draft,
        name="long summaries",
        expression='dims.feature == "summary"',
        components="completion",
        target="waste.summary_too_long",
    )
    rule_add(ruleset=draft, name="no cache class", action="disable", builtin="prefix_cache")
    stored = snapshot()

    moves = ruleset_try(ruleset=draft)

    assert moves == [
        ReasonMove("cached_prompt", "cache.prefix_cache", "effective.input", 1200),
        ReasonMove("cached_prompt", "cache.prefix_cache", "waste.error", 600),
        ReasonMove("output", "effective.output", "waste.summary_too_long", 200),
    ]
    assert ruleset_try(ruleset=active_ruleset()) == []
    last_30h = ruleset_try(ruleset=draft, start=now - timedelta(hours=30), end=now)
    assert last_30h[0] == ReasonMove("cached_prompt", "cache.prefix_cache", "effective.input", 1800)
    assert not Reason.objects.filter(name="waste.summary_too_long").exists()
    assert snapshot() == stored


# --- ingest alongside: the increment of a concurrent batch is counted once -----------------------


_errors: list[BaseException] = []


def _in_thread(work: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:
            _errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _blocked(thread: threading.Thread) -> bool:
    thread.join(timeout=1.0)
    return thread.is_alive()


def _settled() -> None:
    """Neither side failed; the rollup is what a reclassification from scratch gives, and holds
    every record once."""
    assert not _errors, _errors
    got = snapshot()
    reclassify_run(start=START, end=START + timedelta(days=1))
    assert snapshot() == got
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(prompt + completion + padding + recomputed + draft - draft_accepted) FROM ingest_record"
        )
        assert sum(got.values()) == cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_reclassification_waits_for_an_ingest_in_flight_and_counts_its_records(truncate_records: None) -> None:
    _errors.clear()
    source = collector_key("vllm-eu").key.pk
    store(source, [plain(DAY1 + timedelta(hours=3))])
    written, release = threading.Event(), threading.Event()

    def ingest() -> None:
        with transaction.atomic():
            store(source, [plain(DAY1 + timedelta(hours=3, minutes=1)), plain(DAY1 + timedelta(hours=5))])
            written.set()
            release.wait(10)

    ingesting = _in_thread(ingest)
    assert written.wait(10)
    reclassifying = _in_thread(lambda: reclassify_day(day=START, ruleset=active_ruleset()))
    assert _blocked(reclassifying)
    release.set()
    ingesting.join(10)
    reclassifying.join(10)

    assert classes()["waste.duplicate"] == 600
    _settled()


@pytest.mark.django_db(transaction=True)
def test_an_ingest_waits_for_a_reclassification_and_adds_to_its_result(truncate_records: None) -> None:
    _errors.clear()
    source = collector_key("vllm-eu").key.pk
    store(source, [plain(DAY1 + timedelta(hours=3))])
    ruleset = active_ruleset()
    locked, release = threading.Event(), threading.Event()

    def reclassify() -> None:
        with transaction.atomic():
            reclassify_day(day=START, ruleset=ruleset)
            locked.set()
            release.wait(10)

    reclassifying = _in_thread(reclassify)
    assert locked.wait(10)
    ingesting = _in_thread(lambda: store(source, [plain(DAY1 + timedelta(hours=3, minutes=1))]))
    assert _blocked(ingesting)
    release.set()
    reclassifying.join(10)
    ingesting.join(10)

    assert classes()["waste.duplicate"] == 600
    _settled()


@pytest.mark.django_db(transaction=True)
def test_a_reclassification_of_another_day_does_not_wait_for_an_ingest_in_flight(truncate_records: None) -> None:
    """The lock is the day's, not the rollup table's: two days reclassify at once (reclassify_run)
    while other days' batches go on."""
    _errors.clear()
    source = collector_key("vllm-eu").key.pk
    store(source, [plain(DAY1 + timedelta(days=1, hours=3))])
    written, release = threading.Event(), threading.Event()

    def ingest() -> None:
        with transaction.atomic():
            store(source, [plain(DAY1 + timedelta(hours=3)), plain(DAY1 + timedelta(hours=3, minutes=1))])
            written.set()
            release.wait(10)

    ingesting = _in_thread(ingest)
    assert written.wait(10)
    reclassifying = _in_thread(lambda: reclassify_day(day=START + timedelta(days=1), ruleset=active_ruleset()))
    reclassifying.join(5)
    done_while_ingesting = not reclassifying.is_alive()
    release.set()
    ingesting.join(10)

    assert done_while_ingesting
    assert classes()["waste.duplicate"] == 600
    _settled()


def test_yesterday_is_marked_for_the_nightly_recompute(db):
    from datetime import UTC, datetime, timedelta

    from apps.classification.models import DirtyDay
    from apps.classification.tasks import yesterday_mark_dirty

    yesterday_mark_dirty.apply()

    assert list(DirtyDay.objects.values_list("day", flat=True)) == [datetime.now(UTC).date() - timedelta(days=1)]
