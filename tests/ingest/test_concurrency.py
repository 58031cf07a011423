"""Exactly once when the same records arrive at the same moment in different requests."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import msgspec
import pytest
from django.db import connection, transaction

from apps.ingest.contract import RecordV1
from apps.ingest.models import HourlyUsage, Record
from apps.pipeline.records import records_store
from tests.factories import collector_key, record


def post(url: str, secret: str, records: list[dict]) -> dict:
    request = urllib.request.Request(
        f"{url}/api/v1/records",
        data=json.dumps({"records": records}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.usefixtures("truncate_records")
def test_a_second_request_waits_for_the_first_and_counts_duplicates(live_server):
    key = collector_key()
    batch = [record() for _ in range(50)]
    typed = [msgspec.convert(r, RecordV1, strict=False) for r in batch]
    first_stored = threading.Event()
    release_first = threading.Event()
    second: dict = {}

    def first_request() -> None:
        with transaction.atomic():
            records_store(source_id=key.key.pk, records=typed)
            first_stored.set()
            release_first.wait(10)
        connection.close()

    def second_request() -> None:
        second.update(post(live_server.url, key.secret, batch))

    a = threading.Thread(target=first_request)
    a.start()
    assert first_stored.wait(10)
    b = threading.Thread(target=second_request)
    b.start()
    time.sleep(1.0)
    still_waiting = b.is_alive()  # the second insert blocks on the first's uncommitted rows
    release_first.set()
    a.join(10)
    b.join(30)

    assert still_waiting
    assert second == {"accepted": 0, "duplicates": 50, "rejected": []}
    assert Record.objects.filter(source=key.key).count() == 50
    assert sum(u.records for u in HourlyUsage.objects.filter(source=key.key)) == 50


@pytest.mark.usefixtures("truncate_records")
def test_racing_requests_with_the_same_records_store_them_once(live_server):
    key = collector_key()
    batch = [record() for _ in range(300)]
    start = threading.Barrier(3)
    results: list[dict] = []

    def send() -> None:
        start.wait()
        results.append(post(live_server.url, key.secret, batch))

    threads = [threading.Thread(target=send) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert sum(r["accepted"] for r in results) == 300
    assert sum(r["duplicates"] for r in results) == 600
    assert Record.objects.filter(source=key.key).count() == 300
    assert sum(u.records for u in HourlyUsage.objects.filter(source=key.key)) == 300


def test_a_batch_that_waited_for_another_to_create_the_month_partition_uses_it(transactional_db) -> None:
    """Two first batches of a new month: the second waits on the first's advisory lock and must
    then find the partition the first made, not create it again (DuplicateTable, a 500)."""
    import psycopg

    settings = connection.settings_dict
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"], port=settings["PORT"] or None
    )
    month, name = "2031-01-01", "ingest_record_y2031m01"
    first, second = psycopg.connect(conninfo), psycopg.connect(conninfo)
    found: dict = {}

    def create_after_wait() -> None:
        try:
            found["second"] = second.execute("SELECT ingest_record_partition_create(%s)", [month]).fetchone()[0]
            second.commit()
        except psycopg.Error as exc:
            found["second"] = exc
            second.rollback()

    try:
        assert first.execute("SELECT ingest_record_partition_create(%s)", [month]).fetchone()[0] == name
        waiting = threading.Thread(target=create_after_wait)
        waiting.start()
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline
            and not first.execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
        ):
            time.sleep(0.05)
        first.commit()
        waiting.join(timeout=10)
        assert found["second"] is None  # it found the table: nothing created, no error
    finally:
        first.execute(f"DROP TABLE IF EXISTS {name}")
        first.commit()
        first.close()
        second.close()
