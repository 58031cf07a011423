"""The tests' databases are copies of a migrated template (devtools/templatedb.py)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from devtools import templatedb
from tests.processes import database_url_named, worker_suffix


@pytest.fixture
def migrations_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(templatedb.ROOT / "migrations", tmp_path / "migrations")
    monkeypatch.setattr(templatedb, "ROOT", tmp_path)
    return tmp_path / "migrations"


def test_the_template_is_named_after_the_migrations_the_day_and_the_settings(migrations_copy, monkeypatch):
    monkeypatch.delenv("COSTPLATFORM_RETENTION_MONTHS", raising=False)
    with time_machine.travel(datetime(2027, 3, 1, 10, tzinfo=UTC), tick=False):
        name = templatedb.template_name()
        assert name.startswith(templatedb.PREFIX) and name == templatedb.template_name()
        some = next(migrations_copy.rglob("0001_*.py"))
        some.write_text(some.read_text() + "\n# changed\n")
        changed = templatedb.template_name()
        monkeypatch.setenv("COSTPLATFORM_RETENTION_MONTHS", "7")
        resettled = templatedb.template_name()
        monkeypatch.setenv("PYTEST_SOMETHING_ELSE", "x")  # not a setting
        assert templatedb.template_name() == resettled
    with time_machine.travel(datetime(2027, 3, 2, 10, tzinfo=UTC), tick=False):
        next_day = templatedb.template_name()
    assert len({name, changed, resettled, next_day}) == 4


def test_no_template_where_migrations_run_as_another_role(monkeypatch):
    monkeypatch.setenv(templatedb.ENV, "1")
    monkeypatch.delenv("DATABASE_OWNER_URL", raising=False)
    assert templatedb.wanted()
    monkeypatch.setenv("DATABASE_OWNER_URL", "postgresql://owner@127.0.0.1:5432/costplatform")
    assert not templatedb.wanted() and not templatedb.usable()
    with pytest.raises(ValueError, match="DATABASE_OWNER_URL"):
        templatedb.template_ready(settings.DATABASE_URL)
    monkeypatch.setenv(templatedb.ENV, "0")
    monkeypatch.delenv("DATABASE_OWNER_URL")
    assert not templatedb.wanted()


@pytest.mark.django_db
def test_a_copy_holds_every_migration_and_the_seeded_rows():
    url = database_url_named(f"costplatform_copy_check{worker_suffix()}")
    templatedb.database_copy(url)
    try:
        with psycopg.connect(url) as copy:
            applied = set(copy.execute("SELECT app, name FROM django_migrations").fetchall())
            reasons = copy.execute("SELECT count(*) FROM classification_reason").fetchone()
            tables = {name for (name,) in copy.execute("SELECT relname FROM pg_class WHERE relkind IN ('r', 'p')")}
    finally:
        with psycopg.connect(database_url_named("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "costplatform_copy_check{worker_suffix()}" WITH (FORCE)')
    on_disk = set(MigrationLoader(connection, ignore_no_migrations=True).disk_migrations)
    assert applied >= on_disk and len(on_disk) > 100
    assert reasons and reasons[0] > 0  # the data migrations' rows are there
    models = set(connection.introspection.django_table_names(include_views=False))
    assert len(models) > 50 and not models - tables  # every model's table


def test_templates_of_other_migrations_are_dropped_and_one_in_use_is_kept():
    stale, busy = f"{templatedb.PREFIX}stale{worker_suffix()}", f"{templatedb.PREFIX}busy{worker_suffix()}"
    with psycopg.connect(database_url_named("postgres"), autocommit=True) as admin:
        for name in (stale, busy):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        current = templatedb.template_ready(settings.DATABASE_URL)
        with psycopg.connect(database_url_named(busy)):
            templatedb._stale_drop(admin, keep=current)
            names = {row[0] for row in admin.execute("SELECT datname FROM pg_database").fetchall()}
        admin.execute(f'DROP DATABASE IF EXISTS "{busy}" WITH (FORCE)')
    assert current in names and busy in names and stale not in names


def test_a_copy_whose_template_went_meanwhile_makes_it_again(monkeypatch):
    """Another process made the next day's template and dropped this one between the lookup and
    the copy: the copy looks again, and the template is made anew."""
    ready = templatedb.template_ready
    answers = iter([f"{templatedb.PREFIX}gone"])
    monkeypatch.setattr(templatedb, "template_ready", lambda url: next(answers, None) or ready(url))
    name = f"costplatform_copy_again{worker_suffix()}"
    templatedb.database_copy(database_url_named(name))
    with psycopg.connect(database_url_named("postgres"), autocommit=True) as admin:
        made = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert made is not None
