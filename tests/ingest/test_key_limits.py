"""What a collector key may write: its business lines, reconciliation records and how far back
(apps/ingest/contract.py KeyLimits). Each test attacks one limit over HTTP with a real key: the
record beyond it is a dead letter with the reason, and the rest of the batch is stored."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_create
from apps.ingest.contract import KeyLimits, decode_batch
from apps.ingest.models import Record, Rejection
from tests.conftest import Collector
from tests.factories import record

pytestmark = pytest.mark.django_db

RECONCILIATION = {"costplatform.kind": "reconciliation", "business_line": "search"}


def sender(name: str = "search-vllm", **limits: Any) -> tuple[Collector, CollectorKey]:
    made = collector_key_create(name=name, **limits)
    return Collector(Client(), made.secret), made.key


def days_ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


def stored_ids(key: CollectorKey) -> set[str]:
    return set(Record.objects.filter(source=key).values_list("record_id", flat=True))


def test_a_new_key_has_the_safe_limits() -> None:
    key = collector_key_create(name="fresh").key
    key.refresh_from_db()

    assert key.business_lines == []  # every line: the edge's attribution map decides it
    assert key.reconciliation is False
    assert key.backdate_days == 3
    assert key.backfill is False


def test_the_command_makes_a_key_with_the_safe_limits_unless_told() -> None:
    call_command("create_collector_key", name="plain", stdout=io.StringIO(), stderr=io.StringIO())
    call_command(
        "create_collector_key",
        "--business-line=search",
        "--business-line=ads",
        "--reconciliation",
        "--backdate-days=7",
        "--backfill",
        name="told",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )

    plain, told = CollectorKey.objects.get(name="plain"), CollectorKey.objects.get(name="told")
    assert (plain.business_lines, plain.reconciliation, plain.backdate_days, plain.backfill) == ([], False, 3, False)
    assert (told.business_lines, told.reconciliation, told.backdate_days, told.backfill) == (
        ["ads", "search"],
        True,
        7,
        True,
    )


def test_it_refuses_a_line_the_key_may_not_write_and_stores_the_rest() -> None:
    collector, key = sender(business_lines=["search"])
    batch = [
        record(record_id="ok-1", dims={"business_line": "search"}),
        record(record_id="forged", dims={"business_line": "payments", "team": "risk"}),
        record(record_id="ok-2", dims={"business_line": "search", "feature": "web"}),
    ]

    result = collector.send(batch).json()

    assert result["accepted"] == 2
    assert [(r["index"], r["record_id"]) for r in result["rejected"]] == [(1, "forged")]
    reason = "business line 'payments' is not allowed for key 'search-vllm' (allowed: search)"
    assert result["rejected"][0]["errors"] == {"dims.business_line": [reason]}
    assert stored_ids(key) == {"ok-1", "ok-2"}
    dead = Rejection.objects.get(source=key)
    assert dead.record_id == "forged" and dead.errors == {"dims.business_line": [reason]}
    assert '"payments"' in dead.raw


def test_it_refuses_a_record_without_a_line_from_a_key_limited_to_lines() -> None:
    collector, key = sender(business_lines=["search", "ads"])

    result = collector.send([record(record_id="no-line", dims={"team": "web"})]).json()

    assert result["accepted"] == 0
    assert result["rejected"][0]["errors"]["dims.business_line"] == [
        "missing; key 'search-vllm' writes only named lines (allowed: ads, search)"
    ]
    assert stored_ids(key) == set()


def test_a_key_for_every_line_writes_any_line() -> None:
    collector, _ = sender()

    result = collector.send([record(dims={"business_line": "payments"}), record(dims={"team": "x"})]).json()

    assert result["accepted"] == 2 and result["rejected"] == []


def test_it_refuses_a_30_day_old_record_from_an_ordinary_key() -> None:
    collector, key = sender("x")

    result = collector.send([record(record_id="old", ts=days_ago(30)), record(record_id="new")]).json()

    assert result["accepted"] == 1
    assert result["rejected"][0]["record_id"] == "old"
    assert result["rejected"][0]["errors"] == {
        "ts": [
            "record is 30 days old; key 'x' accepts records up to 3 days old; an admin can mark the key for backfill"
        ]
    }
    assert stored_ids(key) == {"new"}
    assert Rejection.objects.get(source=key).record_id == "old"


def test_a_record_inside_the_window_is_stored_and_the_window_is_the_keys() -> None:
    collector, key = sender("week", backdate_days=7)

    result = collector.send([record(record_id="six", ts=days_ago(6)), record(record_id="eight", ts=days_ago(8))])

    assert result.json()["accepted"] == 1
    assert "accepts records up to 7 days old" in result.json()["rejected"][0]["errors"]["ts"][0]
    assert stored_ids(key) == {"six"}


def test_a_backfill_key_stores_a_30_day_old_record() -> None:
    collector, key = sender("history", backfill=True)

    result = collector.send([record(record_id="old", ts=days_ago(30))]).json()

    assert result == {"accepted": 1, "duplicates": 0, "rejected": []}
    assert stored_ids(key) == {"old"}


def test_a_backfill_key_is_still_held_to_the_platforms_maximum_age(settings) -> None:
    settings.INGEST_MAX_AGE_DAYS = 20
    collector, _ = sender("history", backfill=True)

    result = collector.send([record(record_id="too-old", ts=days_ago(30))]).json()

    assert result["accepted"] == 0
    assert result["rejected"][0]["errors"]["ts"] == ["must be within the last 20 days"]


def test_it_refuses_reconciliation_records_from_a_key_without_the_permission() -> None:
    collector, key = sender("edge")

    result = collector.send([record(record_id="gap", dims=RECONCILIATION), record(record_id="plain")]).json()

    assert result["accepted"] == 1
    assert result["rejected"][0]["errors"] == {
        "dims.costplatform.kind": [
            "key 'edge' may not send reconciliation records; an admin can allow them for the key"
        ]
    }
    assert stored_ids(key) == {"plain"}
    assert Rejection.objects.get(source=key).record_id == "gap"


def test_a_key_allowed_to_reconcile_stores_a_reconciliation_record() -> None:
    collector, key = sender("reconciler", reconciliation=True)

    result = collector.send([record(record_id="gap", dims=RECONCILIATION)]).json()

    assert result["accepted"] == 1
    assert stored_ids(key) == {"gap"}


def test_every_reason_of_a_record_is_reported_also_on_the_strict_path() -> None:
    # An invalid record in the batch sends it down the item-by-item path: the limits hold there
    # too, and a record that breaks several rules gets all of them.
    collector, key = sender("search-vllm", business_lines=["search"])
    batch = [
        record(record_id="broken", **{"tokens.prompt": -1}),
        record(
            record_id="many",
            ts=days_ago(10),
            dims={"business_line": "payments", "costplatform.kind": "reconciliation"},
            **{"tokens.prompt_cached": 5000},
        ),
        record(record_id="fine", dims={"business_line": "search"}),
    ]

    result = collector.send(batch).json()

    assert result["accepted"] == 1 and stored_ids(key) == {"fine"}
    errors = {r["record_id"]: r["errors"] for r in result["rejected"]}
    assert set(errors["many"]) == {"tokens.prompt_cached", "dims.business_line", "dims.costplatform.kind", "ts"}
    assert "tokens.prompt" in errors["broken"]


def test_the_limits_also_hold_for_ndjson_bodies() -> None:
    collector, key = sender("search-vllm", business_lines=["search"])
    lines = [
        record(record_id="a", dims={"business_line": "search"}),
        record(record_id="b", dims={"business_line": "ads"}),
    ]
    body = "\n".join(json.dumps(line) for line in lines)

    result = collector.post(body, content_type="application/x-ndjson").json()

    assert result["accepted"] == 1 and result["rejected"][0]["record_id"] == "b"
    assert stored_ids(key) == {"a"}


def test_a_batch_within_the_limits_passes_whole_and_in_order() -> None:
    body = json.dumps({"records": [record(record_id="a"), record(record_id="b")]}).encode()
    limits = KeyLimits(key="k", business_lines=frozenset({"customer-service"}))

    batch = decode_batch(body, ndjson=False, max_records=10, max_age=timedelta(days=30), limits=limits)

    assert [r.record_id for r in batch.records] == ["a", "b"] and batch.rejected == []


@pytest.mark.parametrize(
    ("limits", "dims", "field"),
    [
        ({"business_lines": ["search"]}, {"business_line": "search", "Business_Line": "payments"}, "Business_Line"),
        ({"business_lines": ["search"]}, {"business_line": "search", "BUSINESS-LINE": "payments"}, "BUSINESS-LINE"),
        ({}, {"business_line": "search", "Costplatform.Kind": "reconciliation"}, "Costplatform.Kind"),
    ],
)
def test_a_limited_name_in_another_case_is_refused_not_passed(limits: dict, dims: dict, field: str) -> None:
    """Issue 31, a Low: the key limits matched dim names case-sensitively, so `Business_Line` and
    `Costplatform.Kind` passed them."""
    collector, key = sender("edge", **limits)

    plain = record(record_id="plain", dims={"business_line": "search"})
    result = collector.send([record(record_id="cased", dims=dims), plain]).json()

    assert result["accepted"] == 1 and [r["record_id"] for r in result["rejected"]] == ["cased"]
    assert list(result["rejected"][0]["errors"]) == [f"dims.{field}"]
    assert stored_ids(key) == {"plain"}
