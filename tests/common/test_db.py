from __future__ import annotations

import psycopg
from django.db import connection

from apps.common.db import bound_cursor

BYTEA = psycopg.adapters.types["bytea"].oid


def test_bytes_are_dumped_to_bytea_by_psycopgs_own_bytes_dumper_not_the_python_binary_wrappers(db):
    connection.ensure_connection()

    dumper = connection.connection.adapters.get_dumper_by_oid(BYTEA, psycopg.pq.Format.BINARY)

    assert dumper.__name__ == "BytesBinaryDumper", dumper
    assert dumper.__module__ != "psycopg.dbapi20", dumper


def test_bytes_round_trip_through_a_binary_copy_and_a_bound_array(db):
    values = [b"\x00\xff\x10", b"", None, bytes(range(256))]
    with bound_cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE bytea_check (n int, b bytea)")
        with cursor.copy("COPY bytea_check FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "bytea"])
            for n, value in enumerate(values):
                copy.write_row((n, value))
        cursor.execute("SELECT array_agg(b ORDER BY n) = %b::bytea[], %b::bytea FROM bytea_check", [values, b"ab"])
        assert cursor.fetchone() == (True, b"ab")
