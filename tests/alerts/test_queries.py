"""The alerts' reads as composed SQL (apps.alerts.selectors): the exact text of the spike read for
each kind of subject and of the top contributors' read, and each run against the real tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from apps.alerts.detectors.registry import Subject
from apps.alerts.selectors import contributors_query, spike_query
from apps.common.composed import text

H = datetime(2026, 11, 30, 10, tzinfo=UTC)
HOURS = [H, H - timedelta(weeks=1)]
USAGE_JOINS = (
    'FROM "ingest_hourlyusage" u JOIN "ingest_dimset" d ON d.id = u.dims_id '
    'JOIN "ingest_servedmodel" m ON m.id = u.model_id '
)


@pytest.mark.parametrize(
    ("by", "line", "group", "where", "params"),
    [
        ("business_line", "", "d.business_line, d.business_line", " AND d.business_line <> ''", [HOURS]),
        ("business_line", "search", "d.business_line, d.business_line", " AND d.business_line = %s", [HOURS, "search"]),
        ("model", "", "%s::text, m.name", "", ["", HOURS]),
        ("model", "ads", "%s::text, m.name", " AND d.business_line = %s", ["ads", HOURS, "ads"]),
        (
            "caller",
            "",
            "d.business_line, d.dims ->> %s",
            " AND d.business_line <> '' AND coalesce(d.dims ->> %s, '') <> ''",
            ["caller", HOURS, "caller"],
        ),
    ],
)
def test_the_spike_read_of_each_kind_of_subject(by: str, line: str, group: str, where: str, params: list) -> None:
    statement, found = spike_query(by=by, business_line=line, hours=HOURS)
    assert text(statement) == (
        f"SELECT {group}, u.hour, sum((u.prompt + u.completion))::bigint {USAGE_JOINS}"
        f"WHERE u.hour = ANY(%s){where} GROUP BY 1, 2, 3"
    )
    assert found == params


def test_the_contributors_read_of_a_callers_cost() -> None:
    subject = Subject("c", "search", window=(H, H + timedelta(hours=1)), rank_by="cost", dims=(("caller", "web"),))
    statement, params = contributors_query(subject=subject)
    assert text(statement) == (
        "SELECT m.name, coalesce(d.dims->>'feature', ''), coalesce(d.dims->>'step', ''), sum(u.cost) "
        'FROM "pricing_hourlycost" u JOIN "ingest_dimset" d ON d.id = u.dims_id '
        'JOIN "ingest_servedmodel" m ON m.id = u.model_id '
        "WHERE u.hour >= %s AND u.hour < %s AND d.business_line = %s AND d.dims->>%s = %s "
        "GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3"
    )
    assert params == [H, H + timedelta(hours=1), "search", "caller", "web"]


@pytest.mark.django_db
def test_each_read_runs_on_the_real_tables() -> None:
    subjects = [
        Subject("w", "search", model="m", window=(H, H + timedelta(hours=1)), rank_by=rank)
        for rank in ("tokens", "waste")
    ]
    with connection.cursor() as cursor:
        for by in ("business_line", "model", "caller"):
            statement, params = spike_query(by=by, business_line="search", hours=HOURS)
            cursor.execute(text(statement), params)
            assert cursor.fetchall() == []
        for subject in subjects:
            statement, params = contributors_query(subject=subject)
            cursor.execute(text(statement), params)
            assert cursor.fetchall() == []
