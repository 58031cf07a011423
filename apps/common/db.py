"""A cursor for the hot paths that send large arrays as parameters, psycopg's bytea dumper, and
the advisory locks every app serialises its units of work with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import connection
from psycopg.types.string import BytesBinaryDumper


def bound_cursor() -> psycopg.Cursor:
    """A cursor on Django's connection (same transaction) that binds parameters server side,
    so %b sends arrays in binary: Django's cursors quote every array element into the SQL text,
    with a regex per element (a bytea or text array of a batch's size costs milliseconds)."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


def bytea_dumper_fast() -> None:
    """Dump bytes as bytea in binary with psycopg's C dumper. psycopg registers its DB-API
    `Binary` wrapper's dumper, written in Python, for bytea last, so COPY (set_types) and %b
    arrays dumped every prompt hash and digest in Python: a binary COPY of (int8, bytea, text)
    rows took 0.49 us a row of the client's CPU, 0.27 with the C dumper. Connections made after
    the call use it (Django makes its adapters from psycopg's at its first connection); a
    `Binary` value keeps its own dumper when psycopg is left to choose one."""
    psycopg.adapters.register_dumper(bytes, BytesBinaryDumper)


# Advisory locks held to the end of the transaction, named by (namespace, key): each app takes a
# namespace of its own (four letters as an int4, e.g. 0x4C454447 "LEDG") and keys it by the unit it
# serialises (a day's or a month's ordinal, a row's id). Transaction locks, never session locks: a
# pooler in transaction mode may hand the next transaction another server connection.
_XACT_LOCK = "SELECT pg_advisory_xact_lock(%s::int, %s::int)"
_XACT_LOCK_SHARED = "SELECT pg_advisory_xact_lock_shared(%s::int, %s::int)"
_XACT_LOCKS_SHARED = "SELECT pg_advisory_xact_lock_shared(%s::int, k) FROM unnest(%s::int[]) AS k"
_XACT_LOCK_TRY = "SELECT pg_try_advisory_xact_lock(%s::int, %s::int)"


def xact_lock(cursor: Any, namespace: int, key: int, *, shared: bool = False) -> None:
    """Wait for the lock (namespace, key) and hold it to the end of the transaction; shared, it is
    held beside other shared holders and excludes an exclusive one."""
    cursor.execute(_XACT_LOCK_SHARED if shared else _XACT_LOCK, [namespace, key])


def xact_locks_shared(cursor: Any, namespace: int, keys: Sequence[int]) -> None:
    """Hold the locks (namespace, key) shared for each of `keys`, taken in the order given (callers
    that can meet give them sorted, so two never wait on each other), in one statement."""
    if keys:
        cursor.execute(_XACT_LOCKS_SHARED, [namespace, list(keys)])


def xact_lock_try(cursor: Any, namespace: int, key: int) -> bool:
    """Take the lock (namespace, key) to the end of the transaction if no one holds it: whether it
    was taken, without waiting."""
    cursor.execute(_XACT_LOCK_TRY, [namespace, key])
    row = cursor.fetchone()
    return bool(row and row[0])
