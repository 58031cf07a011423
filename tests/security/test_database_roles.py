"""The app's runtime database role is DML-only (costplatform/dbroles.py): connected as it, one
cannot switch the ledger's or the audit log's triggers off, take the replication role, truncate
the books or change a table, while everything the app does still works as it. The ledger's
and the audit log's triggers fire ALWAYS."""

from __future__ import annotations

import io
import json
import secrets
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from apps.classification.ingest import CLASSES
from apps.classification.services import reclassify_run
from apps.ingest.partitions import month_start, partition_drop, partition_name, partitions_ensure, partitions_existing
from apps.ingest.services import staging_table
from apps.ledger.models import JournalEntry, JournalLine, Period
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.periods import period_close, period_ensure
from apps.pricing.services import hours_price
from costplatform.dbroles import RoleError, _grants, runtime_role_setup
from tests import factories
from tests.conftest import Collector
from tests.processes import PlatformServer, database_url_named, recreate_database
from tests.retention.conftest import seeded  # noqa: F401  (a fixture: the chart and reasons, after a flush)

BOOKS = ("ledger_journalentry", "ledger_journalline", "ledger_period", "ledger_periodevent", "auditlog_auditentry")
GUARDED = [
    ("ledger_journalentry", "ledger_journalentry_lock_ins"),
    ("ledger_journalline", "ledger_journalline_lock_upd"),
    ("ledger_period", "ledger_period_guard"),
    ("ledger_periodevent", "ledger_periodevent_append_only"),
    ("ledger_budget", "ledger_budget_closed"),
    ("auditlog_auditentry", "auditlog_auditentry_append_only"),
]


@dataclass(frozen=True)
class Runtime:
    role: str
    conninfo: str

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.conninfo)


@pytest.fixture(scope="session")
def runtime(django_db_setup: None, django_db_blocker: Any) -> Iterator[Runtime]:
    """The runtime role of the test database, set up as `manage.py migrate` does in production,
    by the test database's owner (the superuser the suite connects as). Roles are shared by
    the whole server, so its name carries the database's."""
    with django_db_blocker.unblock():
        settings = connection.settings_dict
        role, password = f"{settings['NAME']}_app"[:63], secrets.token_urlsafe(16)
        runtime_role_setup(role=role, alias="default")
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER ROLE "{role}" PASSWORD %s', [password])
        conninfo = psycopg.conninfo.make_conninfo(
            dbname=settings["NAME"], user=role, password=password, host=settings["HOST"], port=settings["PORT"] or None
        )
    yield Runtime(role, conninfo)


@pytest.fixture
def as_runtime(db: None, runtime: Runtime) -> Iterator[None]:
    """This test's Django connection acts as the runtime role (SET ROLE) until it ends."""
    with connection.cursor() as cursor:
        # The ingest staging table is a temporary table of the session: one made earlier by
        # the superuser would not be the runtime role's to write.
        stages = ", ".join(f"pg_temp.{staging_table(companion)}" for companion in (None, CLASSES))
        cursor.execute(f"DROP TABLE IF EXISTS {stages}")
        cursor.execute(f'SET ROLE "{runtime.role}"')
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET ROLE")


def refused(runtime: Runtime, sql: str) -> str:
    """Run `sql` as the runtime role on a connection of its own; return the error's message."""
    with runtime.connect() as conn, pytest.raises(psycopg.Error) as error:
        conn.execute(sql)
    return str(error.value)


# --- what the runtime role cannot do ---------------------------------------------------------------


def test_it_refuses_the_runtime_role_the_replication_role(runtime: Runtime) -> None:
    assert "permission denied" in refused(runtime, "SET session_replication_role = replica")


@pytest.mark.parametrize(("table", "trigger"), GUARDED)
def test_it_refuses_the_runtime_role_to_disable_a_trigger(runtime: Runtime, table: str, trigger: str) -> None:
    assert "must be owner" in refused(runtime, f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
    assert "must be owner" in refused(runtime, f"ALTER TABLE {table} DISABLE TRIGGER ALL")


@pytest.mark.parametrize("table", BOOKS)
def test_it_refuses_the_runtime_role_to_truncate_the_books(runtime: Runtime, table: str) -> None:
    assert "permission denied" in refused(runtime, f"TRUNCATE {table} CASCADE")


@pytest.mark.parametrize(
    "sql",
    [
        "DROP FUNCTION ledger_journal_guard() CASCADE",
        "DROP TRIGGER ledger_period_guard ON ledger_period",
        "CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql "
        "AS $$ BEGIN RETURN NULL; END $$",
        "CREATE TABLE ingest_record_y2099m01 PARTITION OF ingest_record "
        "FOR VALUES FROM ('2099-01-01 00:00+00') TO ('2099-02-01 00:00+00')",
        "ALTER TABLE ledger_budget DROP CONSTRAINT ledger_budget_amount",
        "DROP TABLE auditlog_auditentry",
        "DELETE FROM auditlog_auditentry",
        "UPDATE ledger_periodevent SET note = 'rewritten'",
        "ALTER ROLE CURRENT_USER SUPERUSER",
    ],
)
def test_it_refuses_the_runtime_role_any_change_of_the_schema_or_the_history(runtime: Runtime, sql: str) -> None:
    message = refused(runtime, sql)

    assert any(word in message for word in ("permission denied", "must be owner", "must be superuser")), message


def test_it_gives_the_runtime_role_no_powers(runtime: Runtime) -> None:
    with runtime.connect() as conn:
        powers = conn.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles "
            "WHERE rolname = current_user"
        ).fetchone()
        owns = conn.execute("SELECT count(*) FROM pg_class WHERE relowner = current_user::regrole").fetchone()

    assert powers == (False, False, False, False, False) and owns == (0,)


def test_it_refuses_to_set_up_a_superuser_as_the_runtime_role(db: None) -> None:
    with pytest.raises(RoleError, match="must not be the owner"):
        runtime_role_setup(role=connection.settings_dict["USER"], alias="default")
    with pytest.raises(CommandError, match="DATABASE_OWNER_URL is not set"):
        call_command("db_roles")


def test_it_sets_up_the_runtime_role_again_from_the_command_line(db: None, runtime: Runtime) -> None:
    out = io.StringIO()

    call_command("db_roles", runtime_role=runtime.role, stdout=out)

    assert f"role {runtime.role} exists" in out.getvalue() and "SELECT, INSERT, UPDATE, DELETE" in out.getvalue()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT has_table_privilege(%s, 'ledger_journalline', 'INSERT'), "
            "has_table_privilege(%s, 'ledger_journalline', 'TRUNCATE'), "
            "has_table_privilege(%s, 'auditlog_auditentry', 'DELETE')",
            [runtime.role] * 3,
        )
        assert cursor.fetchone() == (True, False, False)


@pytest.mark.parametrize("power", ["CREATEDB", "CREATEROLE", "BYPASSRLS"])
def test_it_refuses_to_set_up_a_runtime_role_with_powers(db: None, power: str) -> None:
    role = f"{connection.settings_dict['NAME']}_powerful"[:63]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN {power}')  # gone with the test's rollback

    with pytest.raises(RoleError, match=f"has {power.lower()}"):
        runtime_role_setup(role=role, alias="default")


def test_it_refuses_to_set_up_a_member_of_the_owner(db: None) -> None:
    role = f"{connection.settings_dict['NAME']}_member"[:63]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE "{connection.settings_dict["USER"]}"')

    with pytest.raises(RoleError, match="member of the owner"):
        runtime_role_setup(role=role, alias="default")


def test_the_grants_name_the_database_schema_roles_and_tables_as_identifiers() -> None:
    present = {"ledger_periodevent", "ingest_record_partition_drop(date)"}

    found = [statement.as_string(None) for statement in _grants("app", "own er", "cost-db", 'my "schema"', present)]

    s, dml = '"my ""schema"""', "SELECT, INSERT, UPDATE, DELETE"
    assert found == [
        'GRANT CONNECT, TEMPORARY ON DATABASE "cost-db" TO "app"',
        f'REVOKE CREATE ON SCHEMA {s} FROM "app"',
        f'GRANT USAGE ON SCHEMA {s} TO "app"',
        f'REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM "app"',
        f'GRANT {dml} ON ALL TABLES IN SCHEMA {s} TO "app"',
        f'REVOKE UPDATE, DELETE ON {s}."ledger_periodevent" FROM "app"',
        f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO "app"',
        f'ALTER DEFAULT PRIVILEGES FOR ROLE "own er" IN SCHEMA {s} GRANT {dml} ON TABLES TO "app"',
        f'ALTER DEFAULT PRIVILEGES FOR ROLE "own er" IN SCHEMA {s} GRANT USAGE, SELECT ON SEQUENCES TO "app"',
        f'GRANT EXECUTE ON FUNCTION {s}.ingest_record_partition_drop(date) TO "app"',
    ]


@pytest.mark.parametrize("table", BOOKS)
def test_it_refuses_truncate_to_a_role_granted_it_that_is_no_superuser(db: None, table: str) -> None:
    """The triggers, for an owner that is no superuser (or a role granted TRUNCATE by mistake)."""
    role = f"{connection.settings_dict['NAME']}_truncator"[:63]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}"')
        # Every table, so that CASCADE may reach the tables that reference the books (bill
        # adjustments reference entries and periods) and only the books' triggers can refuse.
        cursor.execute(f'GRANT SELECT, TRUNCATE ON ALL TABLES IN SCHEMA public TO "{role}"')
        cursor.execute(f'SET LOCAL ROLE "{role}"')
        with pytest.raises(DatabaseError, match="cannot be truncated"):
            cursor.execute(f"TRUNCATE {table} CASCADE")


# --- the triggers fire always -------------------------------------------------------------------


def test_it_fires_every_ledger_and_audit_log_trigger_always(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, g.tgname, g.tgenabled FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid "
            "WHERE NOT g.tgisinternal AND (c.relname LIKE 'ledger\\_%%' OR c.relname LIKE 'auditlog\\_%%')"
        )
        triggers = cursor.fetchall()

    assert {(table, trigger) for table, trigger, _ in triggers} >= set(GUARDED)
    assert [row for row in triggers if row[2] != "A"] == []


def test_it_keeps_the_triggers_under_the_replication_role(db: None) -> None:
    """Even a superuser's `session_replication_role = replica` no longer skips them."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("INSERT INTO ledger_period (month, status, tz) VALUES ('2026-09-01', 'closed', 'UTC')")
        with pytest.raises(DatabaseError, match="only be reopened with a recorded reopen event"):
            cursor.execute("UPDATE ledger_period SET status = 'open'")


# --- what the app needs still works as the runtime role -----------------------------------------------


def test_it_creates_a_new_months_partition_as_the_runtime_role(as_runtime: None, runtime: Runtime) -> None:
    month = date(2031, 5, 1)

    assert partitions_ensure([month]) == [partition_name(month)]
    assert partitions_ensure([month]) == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_userbyid(relowner), current_user, session_user FROM pg_class WHERE relname = %s",
            [partition_name(month)],
        )
        owner, current, session = cursor.fetchone()
    # Made by the owner's function while the runtime role was the current user.
    assert (current, owner) == (runtime.role, session)


def test_it_ingests_and_books_as_the_runtime_role(as_runtime: None, runtime: Runtime, collector: Collector) -> None:
    response = collector.send([factories.record(), factories.record()])

    assert response.status_code == 200 and response.json()["accepted"] == 2
    period = period_ensure(month=date(2026, 10, 1))
    JournalEntry.objects.create(kind="accrual", period=period, day=date(2026, 10, 5), currency="CNY")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM ingest_record), (SELECT count(*) FROM ledger_journalentry), current_user"
        )
        assert cursor.fetchone() == (2, 1, runtime.role)


def test_it_drops_an_old_months_partition_as_the_runtime_role(as_runtime: None) -> None:
    month = date(2020, 2, 1)
    partitions_ensure([month])

    assert partition_drop(month) == partition_name(month)
    assert partition_name(month) not in partitions_existing()
    with pytest.raises(DatabaseError, match="retention never drops them"), transaction.atomic():
        partition_drop(month_start(date.today()))


@pytest.mark.usefixtures("seeded")
def test_it_prices_books_and_closes_a_month_as_the_runtime_role(
    as_runtime: None, runtime: Runtime, collector: Collector
) -> None:
    """The pipeline's own locks and writes (LOCK TABLE, the journal's triggers) need no more than DML."""
    factories.price_version(effective_from=datetime(2024, 1, 1, tzinfo=UTC), prices={"*": ("2", "0.5", "6")})
    with time_machine.travel(datetime(2026, 9, 12, tzinfo=UTC), tick=False):
        records = [factories.record(ts=f"2026-09-10T0{hour}:00:00+00:00") for hour in range(3)]
        assert collector.send(records).json()["accepted"] == 3

    reclassify_run(start=date(2026, 9, 10), end=date(2026, 9, 11))
    hours_price(start=datetime(2026, 9, 10, tzinfo=UTC), end=datetime(2026, 9, 11, tzinfo=UTC))
    month_accrue(month=date(2026, 9, 1))
    period_close(month=date(2026, 9, 1), now=datetime(2026, 10, 20, tzinfo=UTC))

    assert JournalLine.objects.filter(period_id=date(2026, 9, 1)).exists()
    assert Period.objects.get(month=date(2026, 9, 1)).status == Period.Status.CLOSED
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (runtime.role,)


# --- end to end: the web app as the runtime role, migrations as the owner -----------------------------


@pytest.fixture
def two_role_platform(tmp_path: Path) -> Iterator[PlatformServer]:
    """A platform on a fresh database: `migrate` as the owner (the test server's superuser), which
    creates the runtime role from DATABASE_URL; gunicorn as that role."""
    owner_url = database_url_named(f"{_base_name()}_roles")
    database = urlsplit(owner_url).path.lstrip("/")
    role, password = f"{database}_app"[:63], secrets.token_urlsafe(16)
    recreate_database(owner_url)
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')  # one left by an earlier run, with another password
    parts = urlsplit(owner_url)
    runtime_url = urlunsplit(parts._replace(netloc=f"{role}:{quote(password)}@{parts.hostname}:{parts.port or 5432}"))
    platform = PlatformServer(tmp_path, database_url=runtime_url)
    platform.env["DATABASE_OWNER_URL"] = owner_url
    migrated = platform.manage("migrate", "--no-input")
    platform.manage("createsuperuser", "--no-input")
    platform.key = platform.manage("create_collector_key", "--name", "roles-e2e").strip()
    assert f"created role {role}" in migrated
    platform.start()
    yield platform
    platform.stop()


def _base_name() -> str:
    return str(connection.settings_dict["NAME"]).removeprefix("test_")


def test_the_app_runs_as_the_runtime_role_end_to_end(two_role_platform: PlatformServer) -> None:
    platform = two_role_platform
    owner_url = platform.env["DATABASE_OWNER_URL"]
    month = partition_name(month_start(date.today()))
    with psycopg.connect(owner_url) as conn:
        assert conn.execute("SELECT to_regclass(%s)", [month]).fetchone() == (None,)

    body = f'{{"records": [{_json(factories.record())}, {_json(factories.record())}]}}'.encode()
    request = urllib.request.Request(
        f"{platform.url}/api/v1/records",
        data=body,
        headers={"Authorization": f"Bearer {platform.key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200

    assert len(platform.wait_records(2)) == 2
    with psycopg.connect(owner_url) as conn:
        owner = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = %s", [month]).fetchone()
        users = conn.execute("SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = current_database()")
        roles = {row[0] for row in users.fetchall()}
    assert owner == (urlsplit(owner_url).username,)  # made at ingest through the owner's function
    assert urlsplit(platform.database_url).username in roles  # gunicorn's connections


def _json(value: Any) -> str:
    return json.dumps(value)
