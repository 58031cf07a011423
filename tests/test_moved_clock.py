"""Every clock the suite reads agrees: this process's, a process it starts, and PostgreSQL's
`now()`. Under `make test-dates` (devtools/timeshift.py) all three are moved to the instant in
COSTPLATFORM_MOVED_CLOCK; a clock left behind (a server not started under the offset, a child
that lost LD_PRELOAD) would make the date tests pass for the wrong reason."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db
MOVED = os.environ.get("COSTPLATFORM_MOVED_CLOCK")


def child_now() -> datetime:
    done = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"], capture_output=True, text=True, check=True
    )
    return datetime.fromtimestamp(float(done.stdout), UTC)


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        value: datetime = cursor.fetchone()[0]
    return value


def test_the_process_its_children_and_postgresql_read_one_clock() -> None:
    here = datetime.now(UTC)
    for other in (child_now(), database_now()):
        assert abs(other - here) < timedelta(seconds=30), (here, other)


@pytest.mark.skipif(not MOVED, reason="the clock is not moved (make test-dates moves it)")
def test_the_clock_is_where_it_was_moved() -> None:
    assert MOVED
    moved_to = datetime.fromisoformat(MOVED)
    # The moved clock runs on from the instant: the suite takes minutes, never days.
    assert moved_to - timedelta(seconds=5) <= datetime.now(UTC) < moved_to + timedelta(hours=3)
    assert moved_to - timedelta(seconds=5) <= database_now() < moved_to + timedelta(hours=3)
