"""A rollup declared once (apps.common.rollup): the upsert it generates, exactly, and run
against a real table."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.common.composed import Identifier, text
from apps.common.rollup import Rollup

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
