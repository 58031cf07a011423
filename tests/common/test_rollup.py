"""A rollup declared once (apps.common.rollup): the upsert it generates, exactly, and run
against a real table."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.db import connection

from apps.common.composed import Identifier, text, unnest_insert
from apps.common.rollup import Marks, MarkTrigger, Rollup

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
    assert text(Marks("t_marks", "hour").mark()) == (
        'INSERT INTO "t_marks" ("hour") SELECT h FROM unnest(%s::timestamptz[]) AS h\n'
        'WHERE NOT EXISTS (SELECT 1 FROM "t_marks" d WHERE d."hour" = h)'
    )
    assert text(MARKS.mark()) == (
        'INSERT INTO "t_marks" ("hour", "day") SELECT h, (h AT TIME ZONE \'UTC\')::date '
        "FROM unnest(%s::timestamptz[]) AS h\n"
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


DAYS = Marks("t_days", "day", type="date")
KEYED = Marks("t_days", "day", type="date", keyed=True)


def test_marks_of_days_take_dates_and_are_read_up_to_the_latest() -> None:
    assert text(DAYS.mark()) == (
        'INSERT INTO "t_days" ("day") SELECT h FROM unnest(%s::date[]) AS h\n'
        'WHERE NOT EXISTS (SELECT 1 FROM "t_days" d WHERE d."day" = h)'
    )
    assert (
        text(KEYED.mark())
        == 'INSERT INTO "t_days" ("day") SELECT h FROM unnest(%s::date[]) AS h\nON CONFLICT DO NOTHING'
    )
    assert text(DAYS.latest()) == 'SELECT max(id) FROM "t_days"'
    assert text(DAYS.marked(through=True)) == 'SELECT DISTINCT "day" FROM "t_days" WHERE id <= %s ORDER BY "day"'
    assert text(DAYS.marked(within=True)) == (
        'SELECT DISTINCT "day" FROM "t_days" WHERE "day" >= %s AND "day" <= %s ORDER BY "day"'
    )
    assert text(DAYS.clear_through()) == 'DELETE FROM "t_days" WHERE id <= %s'


@pytest.mark.django_db
def test_a_keyed_mark_already_there_is_skipped_and_a_read_leaves_later_marks() -> None:
    d1, d2 = date(2026, 1, 1), date(2026, 1, 2)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE t_days (day date PRIMARY KEY)")
        cursor.execute(text(KEYED.mark()), [[d1, d2]])
        cursor.execute(text(KEYED.mark()), [[d2]])
        cursor.execute(text(KEYED.marked()))
        assert cursor.fetchall() == [(d1,), (d2,)]
        cursor.execute("DROP TABLE t_days")
        cursor.execute("CREATE TEMP TABLE t_days (id bigserial PRIMARY KEY, day date)")
        cursor.execute(text(DAYS.mark()), [[d1]])
        cursor.execute(text(DAYS.latest()))
        (latest,) = cursor.fetchone()
        cursor.execute(text(DAYS.mark()), [[d2]])  # written after the read
        cursor.execute(text(DAYS.marked(through=True)), [latest])
        assert cursor.fetchall() == [(d1,)]
        cursor.execute(text(DAYS.clear_through()), [latest])
        cursor.execute("SELECT day FROM t_days")
        assert cursor.fetchall() == [(d2,)]


HOURS_TRIGGER = MarkTrigger(Marks("t_marks", "hour"), "t_mark", "t_stale", ("t_hits", "t_more"))
DAYS_TRIGGER = MarkTrigger(MARKS, "t_mark", "t_stale", ("t_hits",), lock=7)


def test_a_mark_trigger_marks_the_changed_hours_by_the_marks_own_statement() -> None:
    assert HOURS_TRIGGER.create_function() == (
        "CREATE OR REPLACE FUNCTION t_mark() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "BEGIN\n"
        '    INSERT INTO "t_marks" ("hour") SELECT h FROM (SELECT DISTINCT hour FROM changed) AS c(h)\n'
        '    WHERE NOT EXISTS (SELECT 1 FROM "t_marks" d WHERE d."hour" = h);\n'
        "    RETURN NULL;\n"
        "END\n"
        "$$;"
    )
    assert HOURS_TRIGGER.triggers() == tuple(
        f"CREATE TRIGGER t_stale_{event.lower()} AFTER {event} ON {table} REFERENCING {new} TABLE AS changed "
        "FOR EACH STATEMENT EXECUTE FUNCTION t_mark()"
        for table in ("t_hits", "t_more")
        for event, new in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD"))
    )
    assert Marks("t_days", "day", type="date").value(Identifier("hour")).as_string(None) == (
        "(\"hour\" AT TIME ZONE 'UTC')::date"
    )


def test_a_mark_trigger_with_a_lock_holds_each_changed_day_shared_first() -> None:
    assert DAYS_TRIGGER.body() == (
        "\nDECLARE\n    changed_day date;\nBEGIN\n"
        "    FOR changed_day IN SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date FROM changed ORDER BY 1 LOOP\n"
        "        PERFORM pg_advisory_xact_lock_shared(7, changed_day - DATE '1970-01-01');\n"
        "    END LOOP;\n"
        '    INSERT INTO "t_marks" ("hour", "day") SELECT h, (h AT TIME ZONE \'UTC\')::date '
        "FROM (SELECT DISTINCT hour FROM changed) AS c(h)\n"
        '    WHERE NOT EXISTS (SELECT 1 FROM "t_marks" d WHERE d."hour" = h);\n'
        "    RETURN NULL;\nEND\n"
    )


@pytest.mark.django_db
def test_a_mark_trigger_installed_marks_each_changed_hour_once() -> None:
    h1, h2 = datetime(2026, 1, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 23, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE t_marks (hour timestamptz, day date)")
        cursor.execute("CREATE TEMP TABLE t_hits (hour timestamptz, hits int)")
        cursor.execute(DAYS_TRIGGER.create_function().replace("FUNCTION t_mark", "FUNCTION pg_temp.t_mark"))
        for statement in DAYS_TRIGGER.triggers():
            cursor.execute(statement.replace("FUNCTION t_mark", "FUNCTION pg_temp.t_mark"))
        cursor.execute("INSERT INTO t_hits VALUES (%s, 1), (%s, 2), (%s, 3)", [h1, h1, h2])
        cursor.execute("DELETE FROM t_hits WHERE hour = %s", [h1])
        cursor.execute("SELECT hour, day FROM t_marks ORDER BY hour")
        assert cursor.fetchall() == [(h1, h1.date()), (h2, h2.date())]
