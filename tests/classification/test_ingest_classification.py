"""Records are classified as they are stored: the class rollup per class.reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Sum

from apps.classification.models import DirtyDay, HourlyClass
from apps.classification.services import rule_add, ruleset_activate, ruleset_draft_create
from apps.pricing.models import DirtyHour
from tests.factories import record

T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
HASH = "ab" * 16


def classes() -> dict[str, int]:
    rows = HourlyClass.objects.values("reason__name").annotate(n=Sum("tokens"))
    return {row["reason__name"]: row["n"] for row in rows if row["n"]}


def plain(**overrides):
    base = {
        "tokens.system": 0,
        "tokens.tool": 0,
        "tokens.prompt": 1000,
        "tokens.prompt_cached": 600,
        "tokens.completion": 200,
        "prompt_hash": HASH,
        "ts": T0.isoformat(),
    }
    return record(**{**base, **overrides})


def test_stored_records_are_classified_into_the_class_rollup(collector):
    collector.send(
        [
            plain(**{"tokens.structural": 50}),
            plain(prompt_hash="cd" * 16, **{"outcome.status": "timeout", "outcome.finish_reason": None}),
            plain(prompt_hash="ef" * 16, **{"outcome.finish_reason": "length", "tokens.padding": 8}),
        ]
    )

    assert classes() == {
        "cache.prefix_cache": 1800,
        "effective.input": 800,
        "effective.structural": 50,
        "effective.output": 150,
        "waste.timeout": 600,
        "waste.truncated": 200,
        "waste.padding": 8,
    }
    assert DirtyHour.objects.filter(hour=T0).exists()


def test_a_repeat_within_300_seconds_is_a_duplicate_across_batches(collector):
    collector.send([plain()])
    collector.send([plain(ts=(T0 + timedelta(seconds=300)).isoformat())])  # the window's edge: inside
    collector.send([plain(ts=(T0 + timedelta(seconds=900)).isoformat())])  # 600 s after the last: outside

    assert classes()["waste.duplicate"] == 600
    assert classes()["effective.output"] == 400


def test_the_duplicate_key_is_hash_model_and_business_line(collector):
    collector.send(
        [
            plain(),
            plain(model="other-model", ts=(T0 + timedelta(seconds=10)).isoformat()),
            plain(dims={"business_line": "search"}, ts=(T0 + timedelta(seconds=20)).isoformat()),
            plain(**{"outcome.status": "error", "ts": (T0 + timedelta(seconds=30)).isoformat()}),
            plain(ts=(T0 + timedelta(seconds=40)).isoformat(), prompt_hash=None),
        ]
    )

    assert "waste.duplicate" not in classes()


def test_within_one_batch_the_first_by_ts_stays_effective(collector):
    collector.send([plain(ts=(T0 + timedelta(seconds=60)).isoformat()), plain()])

    assert classes()["waste.duplicate"] == 600
    assert classes()["effective.output"] == 200


def test_an_earlier_record_arriving_late_marks_the_later_ones_day_for_reclassification(collector):
    collector.send([plain(ts=(T0 + timedelta(seconds=100)).isoformat())])
    assert not DirtyDay.objects.exists()

    collector.send([plain()])

    assert list(DirtyDay.objects.values_list("day", flat=True)) == [T0.date()]


def test_a_custom_rule_moves_tokens_once_its_set_is_active(collector):
    draft = ruleset_draft_create()
    rule_add(
        ruleset=draft,
        name="summaries too long",
        expression='dims.feature == "summary"',
        components="completion",
        target="waste.summary_too_long",
    )
    ruleset_activate(ruleset=draft)

    collector.send([plain(dims={"feature": "summary"}), plain(prompt_hash="cd" * 16)])

    assert classes()["waste.summary_too_long"] == 200
    assert classes()["effective.output"] == 200
    assert set(HourlyClass.objects.values_list("ruleset__version", flat=True)) == {draft.version}
