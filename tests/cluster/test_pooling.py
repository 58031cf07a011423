"""What lets the app run behind PgBouncer in transaction pooling mode (docs/scaling.md): nothing
prepared by name, and the day-run's lock held in a transaction, not by the session."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection

from apps.common import dayrun
from apps.common.models import JobRun
from tests.faults.harness import wait_until


@pytest.mark.django_db
def test_connections_prepare_no_named_statements() -> None:
    connection.ensure_connection()
    assert connection.connection.prepare_threshold is None  # the ingest's server-binding cursors too


@pytest.mark.django_db(transaction=True)
def test_a_run_holds_its_lock_in_a_transaction_of_its_own_and_no_session_lock() -> None:
    seen: list[tuple[str, bool]] = []

    def work(day: date) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT l.granted, a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                f"WHERE l.locktype = 'advisory' AND l.classid = %s::oid AND {THIS_DATABASE}",
                [dayrun._RUN_LOCK],
            )
            seen.extend((state, granted) for granted, state in cursor.fetchall())

    run = dayrun.jobrun_run(kind="pooling-test", start=date(2026, 1, 1), end=date(2026, 1, 3), work=work)
    assert run.status == JobRun.Status.DONE
    # One lock a step, held by another backend, idle in the transaction that holds it.
    assert seen == [("idle in transaction", True)] * 2
    # Gone with its connection: the server ends a closed connection's backend, and frees its
    # locks, a moment after the client has closed it.
    wait_until(lambda: run_locks_held() == 0, 10, "the day-run locks gone with their connection")


# pg_locks is the cluster's: the other workers' databases run day-runs of their own.
THIS_DATABASE = "l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"


def run_locks_held() -> int:
    """The day-run locks held in this database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l "
            f"WHERE l.locktype = 'advisory' AND l.classid = %s::oid AND {THIS_DATABASE}",
            [dayrun._RUN_LOCK],
        )
        return int(cursor.fetchone()[0])
