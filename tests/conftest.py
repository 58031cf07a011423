from __future__ import annotations

import collections
import contextlib
import functools
import gzip
import importlib
import io
import itertools
import json
import os
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.test import Client
from hypothesis import HealthCheck, settings

from apps.accounts.models import UserScope
from apps.ingest import services
from apps.pricing.services import hours_price, price_set
from devtools import templatedb
from tests import factories
from tests.factories import record
from tests.processes import XDIST_WORKER

# --- property tests on a shared machine -----------------------------------------------------

# The suite runs on two cores beside servers, browsers and engines the tests start: Hypothesis's
# timing checks (an example's deadline, slow input generation) would fail a property on the
# machine's load, not on the code. What the properties assert is untouched; a test's own
# @settings still sets its examples and the rest.
settings.register_profile("shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-machine")


# --- running on several workers (`make test` runs `pytest -n 3`) ----------------------------


def _broker_of_this_worker(url: str) -> str:
    """Each worker its own Redis database: a Celery worker one test starts must not take the
    tasks of the other worker's tests, nor a purge empty its queue."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "redis" or not XDIST_WORKER:
        return url
    base, n = int(parts.path.lstrip("/") or 0), int(XDIST_WORKER.removeprefix("gw"))
    return urllib.parse.urlunsplit(parts._replace(path=f"/{base - n if base >= n else base + n}"))


FAST_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings
    from django.db.backends.postgresql.operations import DatabaseOperations

    DatabaseOperations.sql_flush = _flush_what_holds_rows(DatabaseOperations.sql_flush)  # type: ignore[method-assign]

    from costplatform.celery import app

    url = _broker_of_this_worker(settings.CELERY_BROKER_URL)
    settings.CELERY_BROKER_URL = app.conf.broker_url = os.environ["CELERY_BROKER_URL"] = url
    # The product hashes passwords with PBKDF2 (half a second a hash here); the users the tests
    # make are hashed with a fast hasher instead, and a product hash still verifies. A server
    # a test starts in another process keeps the product's list: its users are made there.
    settings.PASSWORD_HASHERS = [FAST_HASHER, *settings.PASSWORD_HASHERS]
    # The databases the tests make (each worker's, the servers' they start, the benchmarks'
    # short forms') are copies of one migrated template, not a `migrate` from nothing each.
    if templatedb.usable():
        os.environ[templatedb.ENV] = "1"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """This worker's test database is made as a copy of the migrated template (Django's TEST
    TEMPLATE); Django's `migrate` after it finds nothing to apply."""
    from django.conf import settings
    from django.db import connections

    if templatedb.wanted():
        connections["default"].settings_dict["TEST"]["TEMPLATE"] = templatedb.template_ready(settings.DATABASE_URL)


# The tests of the real vLLM engines share them (tests/serving/conftest.py): one worker runs them
# all. They and the other long ones start first, longest first; started last they would run on one
# worker alone while the other waits. (The moved clock's short form runs the last four first.)
VLLM_TESTS = "tests/serving/"
LONG_FIRST = (
    VLLM_TESTS, "tests/cluster/", "tests/faults/", "tests/test_run.py", "tests/hostile/", "tests/bench/",
    "tests/common/test_screens_browser.py", "tests/test_one_truth.py", "tests/dashboards/test_browser.py",
    "tests/security/test_urlconf.py",
)  # fmt: skip


def work_unit(nodeid: str) -> str:
    """What one worker runs whole: a test file (its module fixtures start once), or every vLLM test."""
    return VLLM_TESTS if nodeid.startswith(VLLM_TESTS) else nodeid.split("::")[0]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Node ids made unique, then the long work units first. After pytest-django's sort (the
    database tests, then the transactional ones, then the rest), which would otherwise put the
    vLLM tests, which use no database, last."""
    seen = collections.Counter(item.nodeid for item in items)
    for item in items:
        if seen[item.nodeid] > 1:
            # Schemathesis gives all its cases one node id ("…::test_every_operation…"); xdist
            # schedules by node id and would run one of them alone, silently. Their names differ.
            item._id = type(item._id).parse(f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}")
    shared = [nodeid for nodeid, n in collections.Counter(item.nodeid for item in items).items() if n > 1]
    if shared:
        raise pytest.UsageError(f"tests share a node id, which xdist would run once: {shared}")
    first = {prefix: rank for rank, prefix in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: next((r for p, r in first.items() if item.nodeid.startswith(p)), len(first)))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` runs on three workers (`-n 3`): work units as work_unit says, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return ByWorkUnit(config, log)


@pytest.fixture(autouse=True)
def _books_zone_of_the_test(request: pytest.FixtureRequest) -> None:
    """A test marked `books_in("UTC")` has its figures worked out in that accounting zone (its
    days and months are that zone's), whichever zone the run keeps the books in: `make
    test-dates` keeps them in Shanghai's and New York's. A test that sets the zone itself wins."""
    marker = request.node.get_closest_marker("books_in")
    if marker is not None:
        request.getfixturevalue("settings").ACCOUNTING_TZ = marker.args[0]


@pytest.fixture(autouse=True)
def _fresh_reference_caches() -> Iterator[None]:
    # Ids cached by one test may belong to rows another test's cleanup removed.
    services.reference_caches_clear()
    yield
    services.reference_caches_clear()


@functools.cache
def _migrated_apps() -> Any:
    """The models as the migrations see them: they send no signals (no audit entries)."""
    from django.db.migrations.loader import MigrationLoader

    return MigrationLoader(connection).project_state().apps


def seeded_defaults() -> None:
    """What the data migrations write (the built-in reasons and rule set, the chart of accounts,
    the default alert rules, the health thresholds' defaults row), written again where a
    transactional test's flush removed it."""
    apps = _migrated_apps()

    def migration(name: str) -> Any:
        return importlib.import_module(f"migrations.{name}")

    if not apps.get_model("classification", "Reason").objects.exists():
        migration("classification.0002_builtin_reasons_and_ruleset").seed(apps, None)
        migration("classification.0007_reasoning_component").seed(apps, None)
        migration("classification.0012_cache_write_component").seed(apps, None)
    if not apps.get_model("ledger", "Account").objects.exists():
        apps.get_model("ledger", "ConfigVersion").objects.get_or_create(id=1)
        migration("ledger.0003_seed_chart").seed(apps, None)
    if not apps.get_model("classification", "HealthThreshold").objects.exists():
        migration("classification.0010_health_threshold").seed_defaults(apps, None)
    if not apps.get_model("alerts", "Rule").objects.exists():
        migration("alerts.0002_default_rules").create(apps, None)
        migration("alerts.0003_rule_every").set_every(apps, None)


def _flush_what_holds_rows(original: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """The flush that ends a transactional test, as a TRUNCATE of the tables that hold rows (and,
    CASCADE, of those referencing them), not of every table: a TRUNCATE gives each table and its
    indexes new files, 0.4 s a test for the ~90 tables, where a test writes a few. The guards
    that a TRUNCATE meets are the same. A flush that resets sequences is left to Django."""

    def sql_flush(
        self: Any, style: Any, tables: list[str], *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        if reset_sequences or not tables:
            return original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        from psycopg import sql

        quote = self.quote_name
        holding = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {} WHERE EXISTS (SELECT FROM {})").format(sql.Literal(t), sql.Identifier(t)) for t in tables
        )
        with self.connection.cursor() as cursor:
            cursor.execute(holding.as_string(cursor.connection))
            full = [t for (t,) in cursor.fetchall()]
        return [f"TRUNCATE {', '.join(quote(t) for t in full)} CASCADE"] if full else []

    return sql_flush


_db_blocker: list[Any] = []


@pytest.fixture(scope="session", autouse=True)
def _keep_db_blocker(django_db_blocker: Any) -> None:
    _db_blocker.append(django_db_blocker)


@contextlib.contextmanager
def shared_by_the_module(django_db_blocker: Any, **overrides: Any) -> Iterator[None]:
    """Rows a module's tests share, written once (in a module fixture, inside this): a transaction
    rolled back after the module's last test, each test in a savepoint within it, so that each
    finds the rows as they were written (Django's TestCase.setUpTestData does the same). Not for
    transactional tests, whose flush would empty it."""
    from django.db import transaction
    from django.test import override_settings

    with django_db_blocker.unblock(), override_settings(**overrides), transaction.atomic():
        yield
        transaction.set_rollback(True)


@contextlib.contextmanager
def demo_books_shared(django_db_blocker: Any, at: datetime) -> Iterator[None]:
    """`manage.py demo_data` (a few thousand records, the books in Shanghai's calendar as `make
    demo-data` keeps them) written at `at`, once for a module's tests (shared_by_the_module)."""
    from django.core.management import call_command

    with shared_by_the_module(django_db_blocker, ACCOUNTING_TZ="Asia/Shanghai"):
        with time_machine.travel(at, tick=True):
            call_command("demo_data", "--records", "3000", stdout=io.StringIO())
        yield


def _transactional(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    marker = item.get_closest_marker("django_db")
    return "transactional_db" in names or "live_server" in names or bool(marker and marker.kwargs.get("transaction"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A transactional test ends with a flush, which empties the data migrations' rows too. In
    one process pytest-django runs those tests last; on several workers (`make test`) a test file
    runs whole, and another file's tests may follow: the rows are written back after the flush."""
    try:
        return (yield)
    finally:
        # After the last test the test database is gone with the session's fixtures.
        if nextitem is not None and _transactional(item) and _db_blocker:
            with _db_blocker[0].unblock():
                seeded_defaults()


@pytest.fixture
def truncate_records(transactional_db: None) -> Iterator[None]:
    """For tests that commit: ingest_record is not a Django-managed table, so flush skips it
    (the data migrations' rows are written back after a flush: pytest_runtest_teardown)."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE ingest_record")


class Collector:
    """A test client that sends records with a collector key."""

    def __init__(self, client: Client, secret: str) -> None:
        self.client = client
        self.secret = secret

    def post(self, body: bytes | str, content_type: str = "application/json", **headers: Any) -> Any:
        return self.client.post(
            "/api/v1/records", body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {self.secret}", **headers
        )

    def send(self, records: list[dict[str, Any]], *, gzipped: bool = False, on_time: bool = False) -> Any:
        """on_time: sent as a collector ships records as they finish, a minute after the newest
        (the clock travels there while sending): a suite set in fixed dates means the same on
        any day, where the platform's window for late records would refuse them a year on."""
        body = json.dumps({"records": records}).encode()
        if on_time:
            newest = max(datetime.fromisoformat(r["ts"].replace("Z", "+00:00")) for r in records)
            with time_machine.travel(newest + timedelta(minutes=1), tick=True):
                return self.send(records, gzipped=gzipped)
        if gzipped:
            return self.post(gzip.compress(body), HTTP_CONTENT_ENCODING="gzip")
        return self.post(body)


@pytest.fixture
def collector(db: None, client: Client) -> Collector:
    # A backfill key: many suites date their records days or months back. The limits of a
    # key with the product's defaults are tested in tests/ingest/test_key_limits.py.
    return Collector(client, factories.collector_key(backfill=True).secret)


@pytest.fixture
def reader(db: None, client: Client, django_user_model: Any) -> Client:
    """A logged-in viewer: the least role that reads the APIs (a login alone reads nothing)."""
    user = factories.finance_user("reader", role="viewer")
    reader_client = Client()
    reader_client.force_login(user)
    return reader_client


# --- the pages of every app: a few hours of traffic, and a logged-in user of a role ----------

_users = itertools.count(1)
T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)


def traffic_at(ts: datetime) -> list[dict[str, Any]]:
    """One moment of two business lines: ok, cached, a timeout, a truncated output, an agent step."""
    at = {"ts": ts.isoformat(), "prompt_hash": None}
    return [
        record(**at, dims={"business_line": "support", "feature": "faq", "step": "reason"}),
        record(
            **at,
            dims={"business_line": "support", "feature": "faq", "step": "reason"},
            **{"outcome.status": "timeout", "outcome.finish_reason": None},
        ),
        record(
            **at,
            dims={"business_line": "search", "feature": "rank", "step": "retrieve"},
            **{"outcome.finish_reason": "length", "tokens.prompt_cached": 0},
        ),
        record(**at, model="llama-3-70b", dims={"business_line": "search", "feature": "rank", "step": "plan"}),
    ]


def month_like_records() -> list[dict[str, Any]]:
    """A few hours of two business lines: ok, cached, timeouts, truncated outputs, an agent step."""
    return [found for hour in range(3) for found in traffic_at(T0 + timedelta(hours=hour, minutes=5))]


def priced() -> None:
    price_set(
        model_pattern="*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=T0 - timedelta(days=1),
    )
    hours_price(start=T0, end=T0 + timedelta(hours=3))


@pytest.fixture
def traffic(collector: Any) -> None:
    response = collector.send(month_like_records())
    assert response.status_code == 200 and response.json()["accepted"] == 12, response.content
    priced()


def login_as(role: str, *, lines: list[str] | None = None, money: bool = False) -> Client:
    user = factories.finance_user(f"{role}-{next(_users)}", role=role)
    if lines or money:
        UserScope.objects.create(user=user, business_lines=lines or [], can_see_money=money)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def as_user(db: None) -> Callable[..., Client]:
    return login_as
