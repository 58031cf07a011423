"""A cursor for the hot paths that send large arrays as parameters."""

from __future__ import annotations

import psycopg
from django.db import connection


def bound_cursor() -> psycopg.Cursor:
    """A cursor on Django's connection (same transaction) that binds parameters server side,
    so %b sends arrays in binary: Django's cursors quote every array element into the SQL text,
    with a regex per element (a bytea or text array of a batch's size costs milliseconds)."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)
