from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction

from apps.common.db import bound_cursor, xact_lock, xact_lock_try, xact_locks_shared

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


NAMESPACE = 0x54455354  # "TEST"
TRY = "SELECT pg_try_advisory_xact_lock(%s::int, %s::int)"
TRY_SHARED = "SELECT pg_try_advisory_xact_lock_shared(%s::int, %s::int)"


@pytest.fixture
def other():
    """A second session, as another process would hold the locks."""
    db = connection.settings_dict
    with psycopg.connect(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or 5432, autocommit=False
    ) as conn:
        yield conn.cursor()
        conn.rollback()


def _held(other, key: int, *, shared: bool) -> bool:
    """Whether the other session is kept from the lock (namespace, key) in that mode."""
    other.execute("SAVEPOINT probe")
    other.execute(TRY_SHARED if shared else TRY, [NAMESPACE, key])
    (taken,) = other.fetchone()
    other.execute("ROLLBACK TO SAVEPOINT probe")
    return not taken


@pytest.mark.django_db(transaction=True)
def test_an_exclusive_lock_keeps_others_out_until_the_transaction_ends(other):
    with transaction.atomic(), connection.cursor() as cursor:
        xact_lock(cursor, NAMESPACE, 7)
        assert _held(other, 7, shared=False) and _held(other, 7, shared=True)
        assert not _held(other, 8, shared=False)  # another key is another lock
    assert not _held(other, 7, shared=False)  # let go at the commit


@pytest.mark.django_db(transaction=True)
def test_shared_locks_let_other_readers_in_and_keep_a_writer_out(other):
    with transaction.atomic(), connection.cursor() as cursor:
        xact_lock(cursor, NAMESPACE, 7, shared=True)
        xact_locks_shared(cursor, NAMESPACE, [10, 11, 12])
        xact_locks_shared(cursor, NAMESPACE, [])  # nothing to take
        for key in (7, 10, 11, 12):
            assert not _held(other, key, shared=True) and _held(other, key, shared=False), key
        assert not _held(other, 9, shared=False)
    assert not _held(other, 11, shared=False)


@pytest.mark.django_db(transaction=True)
def test_a_try_takes_a_free_lock_and_reports_a_held_one(other):
    other.execute("SELECT pg_advisory_xact_lock(%s::int, 5)", [NAMESPACE])
    with transaction.atomic(), connection.cursor() as cursor:
        assert xact_lock_try(cursor, NAMESPACE, 5) is False
        assert xact_lock_try(cursor, NAMESPACE, 6) is True
        assert _held(other, 6, shared=True)
