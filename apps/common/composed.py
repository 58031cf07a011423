"""Helpers for SQL composed with psycopg's `sql` module instead of formatted strings: a model's
table as an identifier, a column of an alias, and the text a statement built once is kept as.

Identifiers are quoted by psycopg, so a name never changes the statement's shape; values still
travel as parameters (`%s`, or `%b` on the hot paths' bound cursors)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import models
from psycopg import sql

SQL = sql.SQL
Composable = sql.Composable
Composed = sql.Composed
Identifier = sql.Identifier
Literal = sql.Literal
Placeholder = sql.Placeholder
PARAM = sql.Placeholder()


def table(model: type[models.Model]) -> sql.Identifier:
    """The table of `model`, quoted: SQL names a table through its model, never as a literal."""
    return sql.Identifier(model._meta.db_table)


def col(alias: str, name: str) -> sql.Identifier:
    """Column `name` of the relation `alias` ("alias"."name")."""
    return sql.Identifier(alias, name)


def names(columns: Iterable[str], alias: str | None = None) -> sql.Composed:
    """Comma-separated column identifiers, each of `alias` when given."""
    return sql.SQL(", ").join(sql.Identifier(alias, c) if alias else sql.Identifier(c) for c in columns)


def commas(parts: Iterable[sql.Composable]) -> sql.Composed:
    return sql.SQL(", ").join(parts)


def unnest_insert(table_name: str, columns: Sequence[tuple[str, str]]) -> sql.Composed:
    """INSERT of rows sent as one array a column, each (name, PostgreSQL type) of `columns`, bound
    in binary (%b): a statement for the hot paths' bound cursors."""
    arrays = sql.SQL(", ").join(sql.SQL("%b::{}[]").format(sql.SQL(kind)) for _, kind in columns)
    return sql.SQL("INSERT INTO {} ({}) SELECT * FROM unnest({})").format(
        sql.Identifier(table_name), names(name for name, _ in columns), arrays
    )


def text(statement: sql.Composable) -> str:
    """The statement as the text a cursor executes; identifiers and literals are quoted without
    a connection (psycopg quotes them the same way for any server of this project)."""
    return statement.as_string(None)
