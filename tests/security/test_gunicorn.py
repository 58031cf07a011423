"""Under gunicorn with two workers: a key's rate limit holds across the workers (the buckets
are in PostgreSQL, not in a process), and the server's log at DEBUG holds no key."""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from apps.accounts.models import CollectorKey
from apps.ingest.models import Record
from tests.factories import collector_key, record
from tests.processes import PlatformServer, database_url_named

pytestmark = pytest.mark.slow
RATE = 2  # requests per second, bucket of one second


@pytest.fixture
def server(truncate_records: None, tmp_path: Path) -> Iterator[PlatformServer]:
    # On the test database itself (already migrated): the test commits what the server reads.
    platform = PlatformServer(tmp_path, database_url=database_url_named(connection.settings_dict["NAME"]))
    platform.env.update(LOG_LEVEL="DEBUG", COSTPLATFORM_RATE_BURST_SECONDS="1")
    platform.start()
    yield platform
    platform.stop()


def send(url: str, secret: str) -> tuple[int, str | None]:
    body = json.dumps({"records": [record()]}).encode()
    request = urllib.request.Request(
        f"{url}/api/v1/records",
        data=body,
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, None
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("Retry-After")


def test_the_rate_limit_holds_across_workers_and_the_log_holds_no_key(server):
    made = collector_key()
    CollectorKey.objects.filter(pk=made.key.pk).update(rate_requests=RATE)
    wrong = "cpk_" + secrets.token_urlsafe(32)

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: send(server.url, made.secret), range(40)))
    elapsed = time.monotonic() - started
    assert send(server.url, wrong)[0] == 401

    statuses = Counter(status for status, _ in answers)
    assert set(statuses) == {200, 429}, statuses
    # One shared bucket admits its capacity plus the refill; a bucket per worker would admit
    # up to twice that.
    assert RATE <= statuses[200] <= RATE * (1 + elapsed) + 1, (statuses, elapsed)
    assert all(retry and int(retry) >= 1 for status, retry in answers if status == 429)
    assert Record.objects.filter(source=made.key).count() == statuses[200]  # nothing of a refused one

    server.stop()
    log = server.log.read_text()
    # The refused and unauthorised requests are in the log; the keys they carried are not.
    assert "Too Many Requests: /api/v1/records" in log and "Unauthorized: /api/v1/records" in log
    assert made.secret not in log and wrong not in log
