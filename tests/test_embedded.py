"""The embedded PostgreSQL's setup statements (costplatform/embedded.py): composed, their names
identifiers and their values literals, and sent to psql as text only where something is missing."""

from __future__ import annotations

from costplatform.embedded import setup_statements

FIND_DATABASE = "SELECT 1 FROM pg_database WHERE datname = 'costplatform';"
FIND_ROLE = "SELECT 1 FROM pg_roles WHERE rolname = 'costplatform_app';"


def test_it_makes_the_database_and_the_runtime_role_where_missing() -> None:
    asked: list[str] = []

    def exists(query: str) -> bool:
        asked.append(query)
        return False

    made = list(setup_statements(exists=exists))

    assert asked == [FIND_DATABASE, FIND_ROLE]
    assert made == [
        'CREATE DATABASE "costplatform";',
        'DO $$ BEGIN CREATE ROLE "costplatform_app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT; '
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$;",
    ]


def test_it_makes_nothing_that_is_there() -> None:
    assert list(setup_statements(exists=lambda query: True)) == []
    made = list(setup_statements(exists=lambda query: query == FIND_DATABASE))
    assert made == [
        'DO $$ BEGIN CREATE ROLE "costplatform_app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT; '
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$;"
    ]
