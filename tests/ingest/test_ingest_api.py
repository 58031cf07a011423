from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from apps.ingest.models import HourlyUsage, Record, Rejection
from tests.factories import DELETE, record


def stored_count() -> int:
    return Record.objects.count()


def test_it_stores_a_json_batch(collector):
    response = collector.send([record(), record()])

    assert response.status_code == 200
    assert response.json() == {"accepted": 2, "duplicates": 0, "rejected": []}
    assert stored_count() == 2


def test_a_session_holding_an_older_staging_table_still_stores(collector):
    """A server connection can outlive an upgrade (PgBouncer keeps them for an hour) and hold
    the staging table an older version made, of other columns: this version's has its own name."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE ingest_record_stage_classes (ts timestamptz, reason_0 int2)")

    response = collector.send([record(), record()])

    assert response.status_code == 200
    assert response.json()["accepted"] == 2
    assert stored_count() == 2


def test_it_stores_every_field_as_sent(collector, reader):
    sent = record(
        **{
            "tokens.padding": 7,
            "tokens.draft": 40,
            "tokens.draft_accepted": 31,
            "tokens.recomputed": 64,
            "tokens.structural": 20,
            "attempt": 2,
            "retry_of": "chatcmpl-first",
            "quality_tier": "mid",
        }
    )
    collector.send([sent])

    got = reader.get("/api/v1/records").json()["results"][0]

    assert got["record_id"] == sent["record_id"]
    assert datetime.fromisoformat(got["ts"]) == datetime.fromisoformat(sent["ts"])
    assert got["tokens"] == {**dict.fromkeys(got["tokens"], 0), **sent["tokens"]}
    assert got["dims"] == sent["dims"]
    assert got["outcome"] == sent["outcome"]
    assert got["timing"] == sent["timing"]
    assert (got["model"], got["model_version"], got["endpoint"]) == (sent["model"], "awq-int4", "chat.completions")
    assert (got["attempt"], got["retry_of"], got["quality_tier"]) == (2, "chatcmpl-first", "mid")
    assert got["prompt_hash"] == sent["prompt_hash"]


def test_it_accepts_ndjson(collector):
    body = "\n".join(json.dumps(r) for r in [record(), record(), record()]) + "\n\n"

    response = collector.post(body, content_type="application/x-ndjson")

    assert response.json()["accepted"] == 3


def test_it_rejects_bad_ndjson_lines_one_by_one(collector):
    body = "\n".join([json.dumps(record()), "{not json", json.dumps(record(model=DELETE))])

    result = collector.post(body, content_type="application/x-ndjson").json()

    assert result["accepted"] == 1
    assert [r["index"] for r in result["rejected"]] == [1, 2]
    assert "model" in result["rejected"][1]["errors"]


def test_it_accepts_gzip(collector):
    response = collector.send([record(), record()], gzipped=True)

    assert response.status_code == 200
    assert response.json()["accepted"] == 2


def test_it_refuses_broken_gzip(collector):
    response = collector.post(b"not gzip at all", HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 400
    assert "gzip" in response.json()["detail"]


def test_it_refuses_an_unknown_content_encoding(collector):
    response = collector.post(json.dumps({"records": []}), HTTP_CONTENT_ENCODING="br")

    assert response.status_code == 415


def test_it_refuses_a_gzip_bomb_by_its_decompressed_size(collector, settings):
    settings.INGEST_MAX_BYTES = 100_000
    bomb = gzip.compress(b" " * 5_000_000)
    assert len(bomb) < settings.INGEST_MAX_BYTES

    response = collector.post(bomb, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert "Decompressed" in response.json()["detail"]


def test_it_refuses_a_body_over_the_size_limit(collector, settings):
    settings.INGEST_MAX_BYTES = 1000

    response = collector.send([record() for _ in range(5)])

    assert response.status_code == 413
    assert "1000" in response.json()["detail"]
    assert stored_count() == 0


def test_it_refuses_a_batch_over_the_record_limit(collector, settings):
    settings.INGEST_MAX_RECORDS = 3

    response = collector.send([record() for _ in range(4)])

    assert response.status_code == 413
    assert "at most 3 records" in response.json()["detail"]
    assert stored_count() == 0


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "multipart/form-data; boundary=x"])
def test_it_refuses_other_content_types(collector, content_type):
    response = collector.post("x", content_type=content_type)

    assert response.status_code == 415
    assert "application/json" in response.json()["detail"]


@pytest.mark.parametrize(
    "body",
    ["{", "[]", '{"records": 5}', '{"records": [], "extra": 1}', "   ", '"just a string"'],
)
def test_it_refuses_a_body_that_is_not_a_batch_and_keeps_it(collector, body):
    response = collector.post(body)

    assert response.status_code == 400
    assert response.json()["detail"]
    if body.strip():
        kept = Rejection.objects.get()
        assert kept.index is None
        assert kept.raw == body
        assert "body" in kept.errors


def test_it_needs_a_collector_key(client, db):
    response = client.post("/api/v1/records", json.dumps({"records": [record()]}), content_type="application/json")

    assert response.status_code == 401
    assert response.json()["detail"]
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_it_refuses_an_unknown_key(client, db):
    response = client.post(
        "/api/v1/records",
        json.dumps({"records": [record()]}),
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer cpk_not-a-real-key",
    )

    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_it_refuses_a_revoked_key(collector):
    from apps.accounts.models import CollectorKey

    assert collector.send([record()]).status_code == 200
    call_command("revoke_collector_key", name=CollectorKey.objects.get().name)

    response = collector.send([record()])

    assert response.status_code == 401
    assert stored_count() == 1


def test_a_logged_in_person_cannot_send_records(reader):
    response = reader.post("/api/v1/records", json.dumps({"records": [record()]}), content_type="application/json")

    assert response.status_code == 403


NOW = datetime.now(UTC)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"record_id": DELETE}, "record_id"),
        ({"ts": DELETE}, "ts"),
        ({"model": DELETE}, "model"),
        ({"tokens": DELETE}, "tokens"),
        ({"tokens.prompt": DELETE}, "tokens.prompt"),
        ({"tokens.completion": DELETE}, "tokens.completion"),
        ({"outcome": DELETE}, "outcome"),
        ({"outcome.status": DELETE}, "outcome.status"),
        ({"record_id": ""}, "record_id"),
        ({"record_id": 17}, "record_id"),
        ({"ts": "yesterday"}, "ts"),
        ({"ts": "2026-11-29T10:00:00"}, "ts"),
        ({"ts": (NOW + timedelta(hours=25)).isoformat()}, "ts"),
        ({"ts": "1999-01-01T00:00:00Z"}, "ts"),
        ({"tokens.prompt": -1}, "tokens.prompt"),
        ({"tokens.prompt": 10**9 + 1}, "tokens.prompt"),
        ({"tokens.completion": 1.5}, "tokens.completion"),
        ({"tokens.completion": "12"}, "tokens.completion"),
        ({"tokens.padding": -3}, "tokens.padding"),
        ({"timing.e2e": -1}, "timing.e2e"),
        ({"tokens.prompt_cached": 1201}, "tokens.prompt_cached"),
        ({"tokens.system": 1000, "tokens.tool": 201}, "tokens.system"),
        ({"tokens.structural": 181}, "tokens.structural"),
        ({"tokens.draft": 5, "tokens.draft_accepted": 6}, "tokens.draft_accepted"),
        ({"outcome.status": "fine"}, "outcome.status"),
        ({"outcome.finish_reason": "bored"}, "outcome.finish_reason"),
        ({"endpoint": "images"}, "endpoint"),
        ({"quality_tier": "ultra"}, "quality_tier"),
        ({"attempt": 0}, "attempt"),
        ({"prompt_hash": "not-hex!"}, "prompt_hash"),
        ({"prompt_hash": "0123456789ABCDEF"}, "prompt_hash"),
        ({"prompt_hash": "0123456789abcdeg"}, "prompt_hash"),
        ({"prompt_hash": "0123456789abcdé0"}, "prompt_hash"),
        ({"prompt_hash": "0" * 129}, "prompt_hash"),
        ({"surprise": 1}, "surprise"),
        ({"tokens.bonus": 1}, "tokens.bonus"),
        ({"outcome.mood": "ok"}, "outcome.mood"),
        ({"dims": {f"k{i}": "v" for i in range(33)}}, "dims"),
        ({"dims": {"business_line": 5}}, "dims"),
        ({"dims": {"business_line": "x" * 257}}, "dims"),
        ({"dims": {"k" * 65: "v"}}, "dims"),
        ({"dims": {"": "v"}}, "dims"),
        ({"dims": {"bad key": "v"}}, "dims"),
        ({"dims": None}, "dims"),
        ({"dims": ["business_line"]}, "dims"),
        ({"dims": {"business_line": "a", "team": None}}, "dims"),
    ],
)
def test_it_rejects_invalid_records_by_field(collector, overrides, field):
    bad = record(**overrides)

    result = collector.send([record(), bad]).json()

    assert result["accepted"] == 1
    [rejected] = result["rejected"]
    assert rejected["index"] == 1
    assert field in rejected["errors"], rejected["errors"]
    assert all(isinstance(m, str) and m for m in rejected["errors"][field])


def test_records_sending_one_set_of_dims_in_any_order_or_spacing_share_its_dim_set(collector):
    """The fast decoder reads each distinct dims text of a batch once; the dim set is the same
    whatever the order of the keys or the spacing of the JSON, and a set differs by any value."""
    dims = {"business_line": "search", "team": "core", "user": "u-1"}
    reordered = dict(reversed(dims.items()))
    batch = [record(dims=dims), record(dims=reordered), record(dims=dims), record(dims={**dims, "user": "u-2"})]
    body = json.dumps({"records": batch}, indent=1).replace('"u-1"', ' "u-1" ', 1).encode()

    assert collector.post(body).json()["accepted"] == 4
    stored = {r.record_id: r.dims for r in Record.objects.select_related("dims")}
    assert {rid: dimset.dims for rid, dimset in stored.items()} == {r["record_id"]: r["dims"] for r in batch}
    sets = [stored[r["record_id"]].pk for r in batch]
    assert sets[0] == sets[1] == sets[2] != sets[3]
    # Sent again in another batch (the dims now known to this process), they land on the same sets.
    again = [record(dims=reordered), record(dims={**dims, "user": "u-2"})]
    collector.send(again)
    assert [Record.objects.get(record_id=r["record_id"]).dims_id for r in again] == [sets[0], sets[3]]


def test_it_keeps_rejected_records_raw_with_reasons_and_source(collector, reader):
    bad = record(**{"tokens.prompt": -5})

    collector.send([record(), bad, record()])

    kept = Rejection.objects.get()
    assert json.loads(kept.raw) == bad
    assert kept.record_id == bad["record_id"]
    assert kept.index == 1
    assert "tokens.prompt" in kept.errors
    listed = reader.get("/api/v1/rejections").json()["results"]
    assert [(r["record_id"], r["source"]) for r in listed] == [(bad["record_id"], kept.source.name)]


def test_it_stores_the_valid_records_of_a_partly_bad_batch(collector):
    batch = [record(), record(**{"tokens.prompt": -1}), record(), record(model=DELETE), record()]

    result = collector.send(batch).json()

    assert result["accepted"] == 3
    assert [r["index"] for r in result["rejected"]] == [1, 3]
    assert {r.record_id for r in Record.objects.all()} == {batch[i]["record_id"] for i in (0, 2, 4)}


def test_a_resent_record_counts_as_a_duplicate(collector):
    batch = [record(), record()]
    collector.send(batch)

    again = collector.send([*batch, record()]).json()

    assert again == {"accepted": 1, "duplicates": 2, "rejected": []}
    assert stored_count() == 3
    assert HourlyUsage.objects.get().records == 3


def test_a_record_repeated_inside_a_batch_is_stored_once(collector):
    one = record()

    result = collector.send([one, one, record()]).json()

    assert result == {"accepted": 2, "duplicates": 1, "rejected": []}


def test_a_record_id_repeated_in_a_batch_with_another_ts_is_rejected(collector):
    one = record()
    other = {**one, "ts": (datetime.fromisoformat(one["ts"]) - timedelta(seconds=1)).isoformat()}

    result = collector.send([one, other]).json()

    assert result["accepted"] == 1
    assert "record_id" in result["rejected"][0]["errors"]


def test_the_same_record_id_from_two_sources_is_two_records(client, db):
    from tests.conftest import Collector
    from tests.factories import collector_key

    one = record()
    first = Collector(client, collector_key().secret).send([one]).json()
    second = Collector(client, collector_key().secret).send([one]).json()

    assert first["accepted"] == second["accepted"] == 1


def partitions() -> set[str]:
    from apps.ingest.partitions import partitions_existing

    return set(partitions_existing())


def test_a_record_for_a_new_month_creates_its_partition(collector):
    ts = datetime.now(UTC) + timedelta(hours=20)
    month = f"ingest_record_y{ts.year:04d}m{ts.month:02d}"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {month}")

    result = collector.send([record(ts=ts.isoformat())]).json()

    assert result["accepted"] == 1
    assert month in partitions()


def test_a_late_record_for_an_old_month_lands_in_that_months_partition(collector):
    old = datetime.now(UTC).replace(day=15, hour=12) - timedelta(days=400)

    result = collector.send([record(ts=old.isoformat())]).json()

    assert result["accepted"] == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM ingest_record")
        assert cursor.fetchone()[0] == f"ingest_record_y{old.year:04d}m{old.month:02d}"


def test_a_nul_character_in_any_text_field_is_refused_not_a_server_error(collector):
    bad = [record(record_id="a\x00b"), record(dims={"business_line": "x\x00"}), record(model="m\x00")]

    result = collector.send([record(), *bad]).json()

    assert result["accepted"] == 1
    assert [r["index"] for r in result["rejected"]] == [1, 2, 3]
    assert all("NUL" in r["errors"]["record"][0] for r in result["rejected"])
    assert Rejection.objects.count() == 3
