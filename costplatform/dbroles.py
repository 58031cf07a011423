"""The two database roles (docs/security.md, "Database roles").

The owner owns every table: `manage.py migrate` and `manage.py db_roles` connect as it
(DATABASE_OWNER_URL, the `owner` alias). The app's processes connect as the runtime role
(DATABASE_URL): it may read and write rows and nothing else, so a bug or an injected statement
in the app cannot change a table, disable the ledger's triggers, truncate the journal or take
the replication role. Record partitions are made and dropped by the owner's SECURITY DEFINER
functions (migrations/ingest/0008_partition_functions.py), which the runtime role may call.

Without DATABASE_OWNER_URL everything runs as DATABASE_URL, as before.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from psycopg import sql

OWNER_ALIAS = "owner"
DML = sql.SQL("SELECT, INSERT, UPDATE, DELETE")
# Rows here are history: the runtime role may add them, never change or remove them (their
# triggers refuse it too).
APPEND_ONLY = ("auditlog_auditentry", "ledger_periodevent", "ledger_mappingrulerevision")
DEFINER_FUNCTIONS = ("ingest_record_partition_create(date)", "ingest_record_partition_drop(date)")
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_POWERS = ("rolsuper", "rolcreatedb", "rolcreaterole", "rolreplication", "rolbypassrls")


class RoleError(Exception):
    """The runtime role cannot be set up as asked; the message says why."""


def migration_alias() -> str:
    """The connection migrations run on: the owner's when DATABASE_OWNER_URL is set."""
    return OWNER_ALIAS if OWNER_ALIAS in settings.DATABASES else DEFAULT_DB_ALIAS


def runtime_role_configured() -> str | None:
    """DATABASE_URL's role when it differs from the owner's, else None (one role for all)."""
    if OWNER_ALIAS not in settings.DATABASES:
        return None
    runtime = str(settings.DATABASES[DEFAULT_DB_ALIAS]["USER"])
    return runtime if runtime and runtime != settings.DATABASES[OWNER_ALIAS]["USER"] else None


def runtime_role_setup(*, role: str, password: str = "", alias: str | None = None) -> list[str]:
    """Create the runtime role if missing, check it has no powers, and grant it exactly DML on
    every table (now and later) of the schema, as the owner. Returns what was done, in words."""
    if not _ROLE_NAME.match(role):
        raise RoleError(f"{role!r} is not a plain role name (lower case letters, digits, _)")
    connection = connections[alias or migration_alias()]
    # One transaction: a running app never sees the role between REVOKE ALL and GRANT.
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_database(), current_schema()")
        owner, database, schema = cursor.fetchone()
        if role == owner:
            raise RoleError(f"the runtime role must not be the owner {owner!r}: DATABASE_URL names another role")
        done = [_role_ensure(cursor, connection, role, password)]
        _role_check(cursor, role, owner)
        present = _present(cursor, schema)
        for statement in _grants(role, owner, database, schema, present):
            cursor.execute(statement.as_string(connection.connection))
    dml = DML.as_string(None)
    return [*done, f"granted {role} {dml} on the tables of {database}.{schema} (now and later), owner {owner}"]


def _role_ensure(cursor: Any, connection: Any, role: str, password: str) -> str:
    cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
    if cursor.fetchone():
        return f"role {role} exists"
    statement = sql.SQL(
        "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT"
    ).format(sql.Identifier(role))
    if password:
        # A utility statement takes no parameters: the password goes in as a quoted literal.
        statement += sql.SQL(" PASSWORD {}").format(sql.Literal(password))
    cursor.execute(statement.as_string(connection.connection))
    return f"created role {role}"


def _role_check(cursor: Any, role: str, owner: str) -> None:
    """Refuse a runtime role with powers beyond DML: one it can use would defeat the split."""
    powers_of = sql.SQL("SELECT {} FROM pg_roles WHERE rolname = %s").format(
        sql.SQL(", ").join(map(sql.Identifier, _POWERS))
    )
    cursor.execute(powers_of.as_string(None), [role])
    powers = [name[3:] for name, has in zip(_POWERS, cursor.fetchone(), strict=True) if has]
    if powers:
        raise RoleError(f"role {role} has {', '.join(powers)}: the runtime role must have none (ALTER ROLE ... NO…)")
    cursor.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", [role, owner])
    if cursor.fetchone()[0]:
        raise RoleError(f"role {role} is a member of the owner {owner}: it would have the owner's rights")


def _present(cursor: Any, schema: str) -> set[str]:
    """Which of the append-only tables and definer functions exist (none before migrations)."""
    cursor.execute(
        "SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(format('%%I.%%I', %s::text, t)) IS NOT NULL UNION ALL "
        "SELECT f FROM unnest(%s::text[]) f WHERE to_regprocedure(format('%%I.%%s', %s::text, f)) IS NOT NULL",
        [list(APPEND_ONLY), schema, list(DEFINER_FUNCTIONS), schema],
    )
    return {row[0] for row in cursor.fetchall()}


def _grants(role: str, owner: str, database: str, schema: str, present: set[str]) -> list[sql.Composed]:
    """The statements that give `role` exactly DML on `schema`'s tables (now and later), each
    name an identifier."""
    names = {"r": sql.Identifier(role), "o": sql.Identifier(owner), "s": sql.Identifier(schema), "dml": DML}

    def statement(template: str, **more: sql.Composable) -> sql.Composed:
        return sql.SQL(template).format(**names, **more)

    return [
        statement("GRANT CONNECT, TEMPORARY ON DATABASE {db} TO {r}", db=sql.Identifier(database)),
        statement("REVOKE CREATE ON SCHEMA {s} FROM {r}"),
        statement("GRANT USAGE ON SCHEMA {s} TO {r}"),
        # Exactly DML, whatever was granted before (TRUNCATE, REFERENCES, TRIGGER included).
        statement("REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM {r}"),
        statement("GRANT {dml} ON ALL TABLES IN SCHEMA {s} TO {r}"),
        *(
            statement("REVOKE UPDATE, DELETE ON {table} FROM {r}", table=sql.Identifier(schema, t))
            for t in APPEND_ONLY
            if t in present
        ),
        statement("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {r}"),
        statement("ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} GRANT {dml} ON TABLES TO {r}"),
        statement("ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} GRANT USAGE, SELECT ON SEQUENCES TO {r}"),
        # A function by its signature ("name(argument types)"): the name and types are our own.
        *(
            statement("GRANT EXECUTE ON FUNCTION {s}.{function} TO {r}", function=sql.SQL(f))
            for f in DEFINER_FUNCTIONS
            if f in present
        ),
    ]
