"""A Celery task executed by a real worker process through a real Redis broker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.ingest.partitions import next_month, partition_name, partitions_existing
from apps.ingest.tasks import partitions_ensure_ahead

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(transactional_db):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.fail("this test needs CELERY_BROKER_URL=redis://… (make test sets it)")
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
    }
    queue = f"test-{os.getpid()}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "costplatform",
            "worker",
            "--pool=solo",
            "-Q",
            queue,
            "--loglevel=INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield queue
    process.terminate()
    output, _ = process.communicate(timeout=30)
    print(output)


def test_a_worker_creates_the_partitions_ahead(worker):
    month = datetime.now(UTC).date().replace(day=1)
    for _ in range(settings.PARTITIONS_AHEAD_MONTHS):
        month = next_month(month)
    name = partition_name(month)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {name}")
    assert name not in partitions_existing()

    partitions_ensure_ahead.apply_async(queue=worker)

    deadline = time.monotonic() + 60
    while name not in partitions_existing() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert name in partitions_existing()
