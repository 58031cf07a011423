"""The built-in rule chain and custom moves, on records decoded by the real contract."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.classification.engine import (
    BUILTIN_REASONS,
    BUILTIN_RULES,
    COMPONENT_GROUPS,
    Classifier,
    Move,
    component_tokens,
)
from apps.ingest.contract import RecordV1
from tests.factories import record as record_dict

ONE = Classifier(ruleset_id=1)


def record(**overrides) -> RecordV1:
    base = {"tokens.system": 0, "tokens.tool": 0, "tokens.structural": 0, **overrides}
    return msgspec.convert(record_dict(**base), RecordV1, strict=False)


def split(rec: RecordV1, classifier: Classifier = ONE, *, duplicate: bool = False) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for reason, tokens in zip(classifier.classify(rec, duplicate=duplicate), component_tokens(rec.tokens), strict=True):
        if tokens:
            counts[BUILTIN_REASONS.get(reason, str(reason))] += tokens
    return dict(counts)


TOKENS = {"tokens.prompt": 1000, "tokens.prompt_cached": 600, "tokens.completion": 200}


def test_an_ok_record_is_cache_and_effective():
    rec = record(**TOKENS, **{"tokens.structural": 30})

    assert split(rec) == {
        "cache.prefix_cache": 600,
        "effective.input": 400,
        "effective.structural": 30,
        "effective.output": 170,
    }


@pytest.mark.parametrize("status", ["error", "timeout", "aborted", "rejected"])
def test_a_failed_record_is_waste_of_its_status_but_its_cache_stays_cache(status):
    rec = record(**TOKENS, **{"outcome.status": status, "outcome.finish_reason": None})

    assert split(rec) == {"cache.prefix_cache": 600, f"waste.{status}": 600}


def test_a_duplicate_ok_record_is_waste_duplicate():
    assert split(record(**TOKENS), duplicate=True) == {"cache.prefix_cache": 600, "waste.duplicate": 600}


def test_a_failed_duplicate_counts_as_failed():
    rec = record(**TOKENS, **{"outcome.status": "timeout"})

    assert split(rec, duplicate=True) == {"cache.prefix_cache": 600, "waste.timeout": 600}


def test_a_truncated_output_is_waste_but_its_input_is_effective():
    rec = record(**TOKENS, **{"outcome.finish_reason": "length", "tokens.structural": 50})

    assert split(rec) == {"cache.prefix_cache": 600, "effective.input": 400, "waste.truncated": 200}


def test_padding_drafts_and_recompute_go_to_their_own_reasons():
    rec = record(
        **TOKENS, **{"tokens.padding": 16, "tokens.draft": 90, "tokens.draft_accepted": 70, "tokens.recomputed": 256}
    )

    got = split(rec)

    assert (got["waste.padding"], got["shadow.spec_rejected"], got["shadow.recompute"]) == (16, 20, 256)


def test_a_reconciliation_record_is_all_shadow_unattributed():
    rec = record(**TOKENS, dims={"costplatform.kind": "reconciliation"})

    assert split(rec) == {"shadow.unattributed": 1200}


@pytest.mark.parametrize(
    ("disabled", "overrides", "expected"),
    [
        ("prefix_cache", {}, {"effective.input": 1000, "effective.output": 200}),
        (
            "failed",
            {"outcome.status": "error"},
            {"cache.prefix_cache": 600, "effective.input": 400, "effective.output": 200},
        ),
        (
            "truncated",
            {"outcome.finish_reason": "length"},
            {"cache.prefix_cache": 600, "effective.input": 400, "effective.output": 200},
        ),
        (
            "padding",
            {"tokens.padding": 10},
            {"cache.prefix_cache": 600, "effective.input": 410, "effective.output": 200},
        ),
    ],
)
def test_a_disabled_builtin_lets_its_tokens_follow_the_chain(disabled, overrides, expected):
    classifier = Classifier(ruleset_id=2, disabled=frozenset({disabled}))

    assert split(record(**TOKENS, **overrides), classifier) == expected


def test_a_disabled_duplicate_rule_keeps_duplicates_effective():
    classifier = Classifier(ruleset_id=2, disabled=frozenset({"duplicate"}))

    assert split(record(**TOKENS), classifier, duplicate=True)["effective.output"] == 200


def test_moves_apply_in_order_and_only_when_they_match():
    summary = Move("summaries", lambda r: r.dims.get("feature") == "summary", COMPONENT_GROUPS["completion"], 100)
    later = Move("all big", lambda r: r.tokens.prompt > 5000, COMPONENT_GROUPS["all"], 101)
    classifier = Classifier(ruleset_id=3, moves=(summary, later))

    assert split(record(**TOKENS, dims={"feature": "summary"}), classifier) == {
        "cache.prefix_cache": 600,
        "effective.input": 400,
        "100": 200,
    }
    assert split(record(**TOKENS, dims={"feature": "faq"}), classifier)["effective.output"] == 200
    big = record(**{**TOKENS, "tokens.prompt": 6000}, dims={"feature": "summary"})
    assert split(big, classifier) == {"101": 6200}


@st.composite
def any_record(draw: st.DrawFn) -> RecordV1:
    prompt = draw(st.integers(0, 10**9))
    completion = draw(st.integers(0, 10**9))
    draft = draw(st.integers(0, 10**9))
    return record(
        **{
            "tokens.prompt": prompt,
            "tokens.prompt_cached": draw(st.integers(0, prompt)),
            "tokens.completion": completion,
            "tokens.structural": draw(st.integers(0, completion)),
            "tokens.padding": draw(st.integers(0, 10**9)),
            "tokens.draft": draft,
            "tokens.draft_accepted": draw(st.integers(0, draft)),
            "tokens.recomputed": draw(st.integers(0, 10**9)),
            "outcome.status": draw(st.sampled_from(["ok", "error", "timeout", "aborted", "rejected"])),
            "outcome.finish_reason": draw(st.sampled_from([None, "stop", "length", "abort"])),
            "dims": draw(st.sampled_from([{}, {"costplatform.kind": "reconciliation"}, {"feature": "x"}])),
        }
    )


@given(
    rec=any_record(),
    duplicate=st.booleans(),
    disabled=st.frozensets(st.sampled_from(BUILTIN_RULES)),
    move_all=st.booleans(),
)
def test_classes_always_sum_to_the_processed_total(rec, duplicate, disabled, move_all):
    moves = (Move("x", lambda r: r.dims.get("feature") == "x", COMPONENT_GROUPS["all"], 100),) if move_all else ()
    classifier = Classifier(ruleset_id=9, disabled=disabled, moves=moves)
    t = rec.tokens

    total = sum(split(rec, classifier, duplicate=duplicate).values())

    assert total == t.prompt + t.completion + t.padding + t.recomputed + (t.draft - t.draft_accepted)
