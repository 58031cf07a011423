"""The dashboards' rollup reads as composed SQL (apps.dashboards.queries): the exact text of each
shape a page asks for, and each run against the real tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from apps.classification.models import HourlyClass, Reason
from apps.common.composed import SQL
from apps.dashboards.queries import (
    Grouping,
    Match,
    RollupPart,
    RollupQuery,
    by_conversation_query,
    dim_values,
    duplicates_query,
    record_components_query,
)
from apps.dashboards.rollup import REBUILD
from tests.conftest import traffic_at

D1 = datetime(2026, 11, 1, tzinfo=UTC)
D2 = datetime(2026, 11, 3, tzinfo=UTC)
D3 = datetime(2026, 11, 3, 5, tzinfo=UTC)


def test_it_reads_days_by_line_and_hours_through_the_dim_set_in_grouping_sets() -> None:
    grouping = Grouping((("class", "component"), ("business_line",), ("period", "class")), ("tokens",))
    match = Match("day", "Asia/Shanghai", False, dims=(("team", "a"),), lines=("cs",), reasons=(1, 2))
    parts = (
        RollupPart("dashboards_dailyclass", "day", True, ((D1, D2),)),
        RollupPart("classification_hourlyclass", "hour", False, ((D2, D3),)),
    )
    found = RollupQuery(grouping, match, parts).composed()
    assert found is not None
    statement, params = found
    head = 'SELECT "g0", "g1", "g2", "g3", GROUPING("g0", "g1", "g2", "g3"), sum(c.tokens)::bigint FROM ('
    sets = ' GROUP BY GROUPING SETS (("g0", "g1"), ("g2"), ("g3", "g0"))'
    assert statement.as_string(connection.connection) == (
        f"{head}"
        'SELECT "c"."reason_id" AS "g0", "c"."component" AS "g1", "c"."business_line" AS "g2", "c"."day" AS "g3", '
        '"c"."tokens" FROM "dashboards_dailyclass" c JOIN "ingest_dimset" d ON d.id = c.dims_id '
        'WHERE (("c"."day" >= %s AND "c"."day" < %s)) AND c.reason_id = ANY(%s) AND d.dims @> %s::jsonb '
        'AND "c"."business_line" = ANY(%s)) c'
        f"{sets} UNION ALL {head}"
        'SELECT "c"."reason_id" AS "g0", "c"."component" AS "g1", "d"."business_line" AS "g2", '
        'date_trunc(\'day\', "c"."hour", %s) AS "g3", "c"."tokens" FROM "classification_hourlyclass" c '
        'JOIN "ingest_dimset" d ON d.id = c.dims_id '
        'WHERE (("c"."hour" >= %s AND "c"."hour" < %s)) AND c.reason_id = ANY(%s) AND d.dims @> %s::jsonb '
        'AND "d"."business_line" = ANY(%s)) c'
        f"{sets}"
    )
    day_part = [D1, D2, [1, 2], '{"team": "a"}', ["cs"]]
    assert params == [*day_part, "Asia/Shanghai", D2, D3, [1, 2], '{"team": "a"}', ["cs"]]


def test_it_sums_one_set_without_the_dim_set_when_nothing_needs_it() -> None:
    grouping = Grouping((("currency",),), ("cost",))
    statement, params = RollupPart("pricing_hourlycost", "hour", False, ((D2, D3), (D1, D2))).query(
        grouping, Match("hour", "UTC", True)
    )
    assert statement.as_string(connection.connection) == (
        'SELECT "g0", 0, sum(c.cost) FROM (SELECT "c"."currency" AS "g0", "c"."cost" FROM "pricing_hourlycost" c '
        'WHERE (("c"."hour" >= %s AND "c"."hour" < %s) OR ("c"."hour" >= %s AND "c"."hour" < %s))) c GROUP BY "g0"'
    )
    assert params == [D2, D3, D1, D2]


def test_it_filters_a_line_table_by_its_own_line_and_groups_a_dim_through_the_dim_set() -> None:
    grouping = Grouping((("period", "model", "team"),), ("tokens",))
    match = Match("hour", "UTC", True, dims=(("business_line", "search"),), models=(7,))
    statement, params = RollupPart("classification_hourlyclass", "hour", False, ((D2, D3),)).query(grouping, match)
    assert statement.as_string(connection.connection) == (
        'SELECT "g0", "g1", "g2", 0, sum(c.tokens)::bigint FROM (SELECT "c"."hour" AS "g0", "c"."model_id" AS "g1", '
        'coalesce(d.dims ->> %s, \'\') AS "g2", "c"."tokens" FROM "classification_hourlyclass" c '
        'JOIN "ingest_dimset" d ON d.id = c.dims_id WHERE (("c"."hour" >= %s AND "c"."hour" < %s)) '
        'AND c.model_id = ANY(%s) AND "d"."business_line" = %s) c GROUP BY "g0", "g1", "g2"'
    )
    assert params == ["team", D2, D3, [7], "search"]


def test_a_query_of_parts_without_ranges_is_none() -> None:
    grouping = Grouping((("class",),), ("tokens",))
    part = RollupPart("classification_hourlyclass", "hour", False, ())
    assert RollupQuery(grouping, Match("day", "UTC", True), (part,)).composed() is None


def test_the_duplicates_listing_names_its_tables_and_conditions() -> None:
    text = duplicates_query([SQL("r.prompt_hash = %s"), SQL("d.business_line = ANY(%s)")]).as_string(None)
    assert 'FROM "ingest_record" r\nJOIN "ingest_dimset" d ON d.id = r.dims_id\n' in text
    assert 'JOIN "ingest_servedmodel" om ON om.id = o.model_id' in text
    assert text.endswith(
        "AND r.ts < %s AND r.prompt_hash = %s AND d.business_line = ANY(%s)\n"
        "ORDER BY r.ts DESC, r.source_id DESC, r.record_key DESC\nLIMIT %s\n"
    )
    assert "AND r.ts < %s AND TRUE\n" in duplicates_query([]).as_string(None)


@pytest.mark.django_db
def test_the_composed_read_sums_the_real_rollup(collector: Any) -> None:
    at = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    assert collector.send(traffic_at(at + timedelta(minutes=5))).json()["accepted"] == 4
    grouping = Grouping((("business_line",), ("class", "business_line")), ("tokens",))
    part = RollupPart(HourlyClass._meta.db_table, "hour", False, ((at, at + timedelta(hours=1)),))
    found = RollupQuery(grouping, Match("hour", "UTC", True), (part,)).composed()
    assert found is not None
    with connection.cursor() as cursor:
        cursor.execute(*found)
        rows = cursor.fetchall()
    by_line = {row[0]: row[3] for row in rows if row[2] == 1}  # GROUPING(g0, g1): class (g1) not in the set
    expected: dict[str, int] = {}
    for row in HourlyClass.objects.filter(hour=at).select_related("dims"):
        expected[row.dims.business_line] = expected.get(row.dims.business_line, 0) + row.tokens
    assert by_line == expected and set(by_line) == {"support", "search"}
    names = dict(Reason.objects.values_list("id", "name"))
    per_class = {(names[row[1]].split(".")[0], row[0]) for row in rows if row[2] == 0}
    assert ("waste", "support") in per_class  # the timeout


def test_dim_values_reads_each_dim_set_once_for_the_asked_dims() -> None:
    inner = SQL("SELECT 1")
    assert dim_values(inner, measure="tokens", extra="period").as_string(None) == (
        "SELECT k.dim, CASE WHEN k.dim = 'business_line' THEN d.business_line ELSE coalesce(d.dims ->> k.dim, '') END, "
        '"s"."period", sum(s.tokens)::bigint FROM (SELECT 1) AS s("dims_id", "period", "grouping", "tokens") '
        'JOIN "ingest_dimset" d ON d.id = s.dims_id CROSS JOIN unnest(%s::text[]) AS k(dim) GROUP BY 1, 2, 3'
    )
    assert dim_values(inner, measure="cost", extra=None).as_string(None) == (
        "SELECT k.dim, CASE WHEN k.dim = 'business_line' THEN d.business_line ELSE coalesce(d.dims ->> k.dim, '') END, "
        'sum(s.cost) FROM (SELECT 1) AS s("dims_id", "grouping", "cost") '
        'JOIN "ingest_dimset" d ON d.id = s.dims_id CROSS JOIN unnest(%s::text[]) AS k(dim) GROUP BY 1, 2'
    )


def test_a_days_rebuild_is_generated_from_the_declared_rollups() -> None:
    assert len(REBUILD) == 12
    assert REBUILD[0] == 'DELETE FROM "dashboards_staleday" WHERE "day" = %(day)s AND "hour" < %(end)s'
    assert REBUILD[3] == (
        'INSERT INTO "dashboards_dailyclass" ("day", "model_id", "dims_id", "business_line", "reason_id", '
        '"component", "tokens")\n'
        'SELECT %(start)s, "c"."model_id", "c"."dims_id", "d"."business_line", "c"."reason_id", "c"."component", '
        '"c"."tokens"\n'
        "FROM (\n"
        '    SELECT "model_id", "dims_id", "reason_id", "component", sum("tokens")::bigint AS "tokens"\n'
        '    FROM "classification_hourlyclass" WHERE hour >= %(start)s AND hour < %(end)s\n'
        "    GROUP BY 1, 2, 3, 4\n"
        ') c JOIN "ingest_dimset" d ON d.id = "c"."dims_id"\n'
        "WHERE c.tokens <> 0"
    )
    assert REBUILD[8] == (
        'INSERT INTO "dashboards_dailylinecost" ("day", "model_id", "business_line", "reason_id", "component", '
        '"currency", "tokens", "cost")\n'
        'SELECT "day", "model_id", "business_line", "reason_id", "component", "currency", sum("tokens")::bigint, '
        'sum("cost")\n'
        'FROM "dashboards_dailycost" WHERE day = %(start)s GROUP BY 1, 2, 3, 4, 5, 6'
    )
    assert REBUILD[10] == (
        'INSERT INTO "dashboards_hourlylineclass" ("hour", "model_id", "business_line", "reason_id", "component", '
        '"tokens")\n'
        'SELECT "c"."hour", "c"."model_id", "d"."business_line", "c"."reason_id", "c"."component", '
        'sum("c"."tokens")::bigint\n'
        'FROM "classification_hourlyclass" c JOIN "ingest_dimset" d ON d.id = "c"."dims_id"\n'
        "WHERE c.hour >= %(start)s AND c.hour < %(end)s\n"
        "GROUP BY 1, 2, 3, 4, 5 HAVING sum(c.tokens) <> 0"
    )


def test_a_records_components_are_read_by_its_key_from_the_classified_records() -> None:
    sql = record_components_query(
        SQL("SELECT 1"), [SQL("x.reason_0"), SQL("x.reason_1")], [SQL("x.a"), SQL("x.b - x.a")]
    )
    assert sql.as_string(None) == (
        "SELECT x.reason_0, x.reason_1, x.a, x.b - x.a FROM (SELECT 1) x "
        "WHERE x.ts = %s AND x.source_id = %s AND x.model_id = %s AND x.rollup_dims_id = %s "
        "AND x.prompt = %s AND x.completion = %s AND x.reasoning = %s LIMIT 1"
    )


def test_conversations_sum_the_tokens_of_the_chosen_reasons() -> None:
    where = [SQL("x.ts >= %s"), SQL("x.line_of = ANY(%s)")]
    sql = by_conversation_query(SQL("SELECT 1"), [SQL("x.r0"), SQL("x.r1")], [SQL("x.a"), SQL("x.b")], where)
    chosen = "CASE WHEN x.r0 = ANY(%s) THEN x.a ELSE 0 END + CASE WHEN x.r1 = ANY(%s) THEN x.b ELSE 0 END"
    assert sql.as_string(None) == (
        f"SELECT x.conversation, sum({chosen})::bigint AS measured, sum(x.a + x.b)::bigint "
        "FROM (SELECT 1) x WHERE x.ts >= %s AND x.line_of = ANY(%s) GROUP BY x.conversation "
        f"HAVING sum({chosen}) > 0 ORDER BY measured DESC, x.conversation LIMIT %s"
    )


def test_the_text_of_a_query_is_its_composed_statement_with_the_same_parameters() -> None:
    grouping = Grouping((("period", "team"), ("business_line",)), ("tokens",))
    parts = (
        RollupPart("dashboards_dailyclass", "day", True, ((D1, D2),)),
        RollupPart("classification_hourlyclass", "hour", False, ((D2, D3), (D1, D2))),
    )
    for match in (
        Match("day", "Asia/Shanghai", False, dims=(("business_line", "cs"), ("team", "a")), reasons=(3,)),
        Match("hour", "UTC", True, lines=("cs", "ads"), models=(1, 2)),
    ):
        query = RollupQuery(grouping, match, parts)
        composed = query.composed()
        assert composed is not None
        assert query.statement_text() == (composed[0].as_string(None), composed[1])


def test_queries_alike_but_for_their_values_share_one_composed_statement() -> None:
    grouping = Grouping((("class",),), ("tokens",))
    first = RollupQuery(
        grouping, Match("day", "UTC", True, lines=("a",)), (RollupPart("t", "hour", False, ((D1, D2),)),)
    )
    second = RollupQuery(
        grouping, Match("day", "UTC", True, lines=("b",)), (RollupPart("t", "hour", False, ((D2, D3),)),)
    )
    found, other = first.statement_text(), second.statement_text()
    assert found is not None and other is not None
    assert found[0] == other[0] and found[1] != other[1]
    unfiltered = RollupQuery(grouping, Match("day", "UTC", True), first.parts).statement_text()
    assert unfiltered is not None and unfiltered[0] != found[0]
