"""The upgrade from ReclassifyRun and RepriceRun to JobRun: a run interrupted before it resumes
after it (its row moved over with its progress), and the downgrade gives the rows back."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.classification.services import RUN_KIND as RECLASSIFY_KIND
from apps.classification.services import active_ruleset
from apps.common.dayrun import jobrun_open
from apps.common.models import JobRun
from apps.pricing.services import RUN_KIND as REPRICE_KIND

BEFORE = [("classification", "0005_hourlyclass_no_fk_checks"), ("pricing", "0001_initial")]
AFTER = [("classification", "0006_reclassify_runs_to_jobrun"), ("pricing", "0002_reprice_runs_to_jobrun")]
START, END, NEXT = date(2026, 3, 1), date(2026, 3, 31), date(2026, 3, 17)


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def migrate_latest() -> None:
    """Back to every app's newest migration: going back to BEFORE also unapplies what came after
    it in other apps (the pricing and ledger triggers), which AFTER alone would not bring back."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def rows(sql: str) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_runs_stopped_before_the_upgrade_resume_after_it() -> None:
    ruleset = active_ruleset()
    migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                'INSERT INTO classification_reclassifyrun (start, "end", ruleset_id, next_day, status, error, '
                "started_at, updated_at) VALUES (%s, %s, %s, %s, 'failed', 'worker killed', now(), now())",
                [START, END, ruleset.pk, NEXT],
            )
            cursor.execute(
                'INSERT INTO pricing_repricerun (start, "end", next_day, status, error, started_at, updated_at) '
                "VALUES (%s, %s, %s, 'running', '', now(), now())",
                [START, END, NEXT],
            )
    finally:
        migrate(AFTER)

    reclassify = jobrun_open(kind=RECLASSIFY_KIND, key=str(ruleset.pk), start=START, end=END)
    reprice = jobrun_open(kind=REPRICE_KIND, start=START, end=END)
    assert JobRun.objects.count() == 2  # both found, none made anew
    assert (reclassify.next_day, reclassify.status, reclassify.error) == (NEXT, "failed", "worker killed")
    assert (reprice.next_day, reprice.status) == (NEXT, "running")

    migrate(BEFORE)
    try:
        assert rows("SELECT ruleset_id, next_day, status FROM classification_reclassifyrun") == [
            (ruleset.pk, NEXT, "failed")
        ]
        assert rows("SELECT next_day, status FROM pricing_repricerun") == [(NEXT, "running")]
        assert rows("SELECT count(*) FROM common_jobrun") == [(0,)]
    finally:
        migrate_latest()
