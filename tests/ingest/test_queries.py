"""Ingest's part of the rollup reads (apps.ingest.queries): the exact SQL, and run against the
real usage rollup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from apps.common.composed import SQL, table
from apps.ingest.models import HourlyUsage
from apps.ingest.queries import dims_join, rollup_where
from apps.ingest.selectors import usage_series
from tests.conftest import traffic_at

H1 = datetime(2026, 11, 1, tzinfo=UTC)
H2 = datetime(2026, 11, 2, tzinfo=UTC)


def test_the_rollup_filter_names_the_hours_of_its_alias_and_the_dim_set() -> None:
    where, params = rollup_where(alias="u", start=H1, end=H2, dims={"team": "a"}, business_lines=["cs"])
    assert where.as_string(None) == (
        '"u"."hour" >= %s AND "u"."hour" < %s AND d.dims @> %s::jsonb AND d.business_line = ANY(%s)'
    )
    assert params == [H1, H2, '{"team": "a"}', ["cs"]]
    where, params = rollup_where(alias="c", start=H1, end=H2, dims=None, business_lines=None)
    assert (where.as_string(None), params) == ('"c"."hour" >= %s AND "c"."hour" < %s', [H1, H2])


def test_the_dim_set_is_joined_to_the_rollup_row_as_d() -> None:
    assert dims_join("c").as_string(None) == 'JOIN "ingest_dimset" d ON d.id = "c"."dims_id"'


@pytest.mark.django_db
def test_the_composed_filter_reads_the_real_rollup(collector: Any) -> None:
    at = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    assert collector.send(traffic_at(at + timedelta(minutes=5))).json()["accepted"] == 4
    where, params = rollup_where(
        alias="u", start=at, end=at + timedelta(hours=1), dims={"feature": "rank"}, business_lines=["search"]
    )
    statement = SQL("SELECT sum(u.records) FROM {} u {} WHERE {}").format(table(HourlyUsage), dims_join("u"), where)
    with connection.cursor() as cursor:
        cursor.execute(statement.as_string(None), params)
        assert cursor.fetchone()[0] == 2
    rows = usage_series(
        start=at, end=at + timedelta(hours=1), granularity="hour", group_by=["source", "feature"], business_lines=None
    )
    assert {(row["feature"], row["records"]) for row in rows} == {("faq", 2), ("rank", 2)}
