"""A rollup declared once (apps.common.rollup): the upsert it generates, exactly, and run
against a real table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from apps.common.composed import Identifier, text, unnest_insert
from apps.common.rollup import Marks, Rollup

HITS = Rollup(table="t_hits", key=("hour", "page"), measures=("hits", "bytes"))


def test_the_upsert_adds_the_measures_in_key_order() -> None:
    assert text(HITS.upsert(Identifier("agg"))) == (
        'INSERT INTO "t_hits" AS "u" ("hour", "page", "hits", "bytes")\n'
        '    SELECT * FROM "agg" ORDER BY "hour", "page"\n'
        '    ON CONFLICT ("hour", "page") DO UPDATE SET "hits" = "u"."hits" + excluded."hits", '
        '"bytes" = "u"."bytes" + excluded."bytes"'
    )
    assert HITS.columns == ("hour", "page", "hits", "bytes")


@pytest.mark.django_db
def test_the_upsert_inserts_new_keys_and_adds_to_those_there() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE t_hits (hour int, page text, hits bigint, bytes bigint, PRIMARY KEY (hour, page))"
        )
        cursor.execute("CREATE TEMP TABLE t_new (hour int, page text, hits bigint, bytes bigint)")
        cursor.execute("INSERT INTO t_hits VALUES (1, 'a', 2, 20)")
        cursor.execute("INSERT INTO t_new VALUES (1, 'a', 3, 30), (2, 'b', 1, 10)")
        cursor.execute(text(HITS.upsert(Identifier("t_new"))))
        cursor.execute("SELECT hour, page, hits, bytes FROM t_hits ORDER BY 1")
        assert cursor.fetchall() == [(1, "a", 5, 50), (2, "b", 1, 10)]


MARKS = Marks(table="t_marks", column="hour", day="day")


def test_the_marks_statements_name_their_table_and_columns() -> None:
    assert text(MARKS.mark()) == (
        'INSERT INTO "t_marks" ("hour") SELECT h FROM unnest(%s::timestamptz[]) AS h\n'
        'WHERE NOT EXISTS (SELECT 1 FROM "t_marks" d WHERE d."hour" = h)'
    )
    assert text(MARKS.marked()) == 'SELECT DISTINCT "day" FROM "t_marks" ORDER BY "day"'
    assert text(MARKS.marked(before=True)) == 'SELECT DISTINCT "day" FROM "t_marks" WHERE "hour" < %s ORDER BY "day"'
    assert text(Marks("t_marks", "hour").marked()) == 'SELECT DISTINCT "hour" FROM "t_marks" ORDER BY "hour"'
    assert text(MARKS.clear()) == 'DELETE FROM "t_marks" WHERE "hour" = ANY(%s)'
    assert text(MARKS.take()) == 'DELETE FROM "t_marks" WHERE "hour" >= %s AND "hour" < %s RETURNING "hour"'
    assert text(MARKS.clear_day(day="d", before="e")) == 'DELETE FROM "t_marks" WHERE "day" = %(d)s AND "hour" < %(e)s'


@pytest.mark.django_db
def test_a_mark_is_not_repeated_and_taking_a_range_clears_it() -> None:
    h1, h2 = datetime(2026, 1, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 2, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE t_marks (hour timestamptz, day date)")
        cursor.execute(text(MARKS.mark()), [[h1, h2]])
        cursor.execute(text(MARKS.mark()), [[h1]])
        cursor.execute("SELECT count(*) FROM t_marks")
        assert cursor.fetchone()[0] == 2
        cursor.execute(text(MARKS.take()), [h1, h2])
        assert cursor.fetchall() == [(h1,)]
        cursor.execute("SELECT hour FROM t_marks")
        assert cursor.fetchall() == [(h2,)]


def test_a_rollup_clears_the_rows_of_a_time_range() -> None:
    assert text(HITS.clear()) == 'DELETE FROM "t_hits" WHERE "hour" >= %s AND "hour" < %s'


def test_an_unnest_insert_binds_a_typed_array_a_column() -> None:
    assert text(unnest_insert("t_hits", (("hour", "int"), ("page", "text")))) == (
        'INSERT INTO "t_hits" ("hour", "page") SELECT * FROM unnest(%b::int[], %b::text[])'
    )
