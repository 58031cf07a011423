"""The router's choices, given the replica's lag. The lag itself is measured on a real standby in
test_replica.py; here it is set, to walk every branch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import override_settings

from apps.common.replica import replica_reads
from apps.ingest.models import HourlyUsage
from costplatform import routers

ROUTED = {"DATABASE_ROUTERS": ["costplatform.routers.ReplicaRouter"], "REPLICA_MAX_LAG_SECONDS": 30}


@pytest.fixture
def lag(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float | None]]:
    value: list[float | None] = [0.0]
    monkeypatch.setattr(routers.health, "lag", lambda: value[0])
    with override_settings(**ROUTED):
        yield value


@pytest.mark.django_db(transaction=True)
def test_opted_in_reads_go_to_a_fresh_replica_and_report_its_lag(lag: list[float | None]) -> None:
    lag[0] = 4.0
    with replica_reads() as reads:
        assert HourlyUsage.objects.all().db == "replica"
    assert reads.used and reads.lag == 4.0


@pytest.mark.django_db(transaction=True)
def test_reads_not_opted_in_stay_on_the_primary(lag: list[float | None]) -> None:
    assert HourlyUsage.objects.all().db == "default"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", [30.5, None], ids=["over-the-bound", "down"])
def test_a_lagging_or_down_replica_sends_reads_to_the_primary(lag: list[float | None], value: float | None) -> None:
    lag[0] = value
    with replica_reads() as reads:
        assert HourlyUsage.objects.all().db == "default"
    assert not reads.used


@pytest.mark.django_db(transaction=True)
def test_writes_and_reads_inside_a_transaction_go_to_the_primary(lag: list[float | None]) -> None:
    with replica_reads() as reads:
        assert HourlyUsage.objects.select_for_update().db == "default"
        with transaction.atomic():
            assert HourlyUsage.objects.all().db == "default"
        assert routers.ReplicaRouter().db_for_write(HourlyUsage) == "default"
    assert not reads.used


@pytest.mark.django_db(transaction=True)
def test_sign_in_and_roles_are_always_read_from_the_primary(lag: list[float | None]) -> None:
    with replica_reads() as reads:
        assert User.objects.all().db == "default"
    assert not reads.used


def test_the_replica_is_never_migrated() -> None:
    router = routers.ReplicaRouter()
    assert router.allow_migrate("replica", "ingest") is False
    assert router.allow_migrate("default", "ingest") is None


def test_the_replica_state_is_measured_once_an_interval_and_a_failure_counts_as_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    health, measured = routers.ReplicaHealth(), []

    def measure() -> float:
        measured.append(1)
        return 2.0

    monkeypatch.setattr(health, "_measure", measure)
    with override_settings(REPLICA_CHECK_SECONDS=60):
        assert [health.lag(), health.lag()] == [2.0, 2.0]
        assert len(measured) == 1
        health.failed()
        assert health.lag() is None and len(measured) == 1
    with override_settings(REPLICA_CHECK_SECONDS=0):
        assert health.lag() == 2.0 and len(measured) == 2


@pytest.fixture
def dead_replica(transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A `replica` database on a loopback port nobody listens on, that the router believes up
    (as in the seconds between a replica's stop and the next measurement)."""
    from django.db import connections
    from django.db.utils import load_backend

    from tests.processes import free_port

    primary = connections["default"].settings_dict
    entry = {**primary, "HOST": "127.0.0.1", "PORT": str(free_port()), "OPTIONS": {**primary["OPTIONS"]}}
    entry["OPTIONS"]["connect_timeout"] = "2"
    # A connection of this thread only, outside the aliases the test case guards.
    connections._connections.replica = load_backend(entry["ENGINE"]).DatabaseWrapper(entry, "replica")
    monkeypatch.setattr(routers.health, "lag", lambda: 0.0)
    failed: list[bool] = []
    monkeypatch.setattr(routers.health, "failed", lambda: failed.append(True))
    try:
        with override_settings(**ROUTED, DATABASE_REPLICA_URL="postgresql://127.0.0.1/nowhere"):
            yield
    finally:
        connections["replica"].close()
        delattr(connections._connections, "replica")
    assert failed == [True], "the failure was not reported to the replica's health"


def test_a_page_whose_replica_fails_mid_way_is_read_again_from_the_primary(dead_replica: None) -> None:
    from django.test import Client

    from tests import factories

    reader = Client()
    reader.force_login(factories.finance_user("reader", role="viewer"))
    answer = reader.get("/api/v1/usage", {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"})
    assert answer.status_code == 200, answer.content[:500]
    assert answer.json()["rows"] == []


# The views that mark themselves @replica_view (their GETs may read from the replica), by URL name.
REPLICA_VIEWS = {
    "dashboards:overview",
    "dashboards:waste",
    "dashboards:requests",
    "dashboards:record",
    "dashboards:duplicates",
    "dashboards:conversation",
    "finance",
    "finance-journal",
    "month-pack",
    "audits",
    "audit-report",
    "usage",
    "records",
    "usage-classes",
    "ledger-trial-balance",
    "ledger-matrix",
    "ledger-journal",
    "ledger-line-usage",
    "ledger-budget-vs-actual",
}


def url_views() -> Iterator[tuple[str, object]]:
    from django.urls import get_resolver

    def walk(patterns: list[object], namespace: str) -> Iterator[tuple[str, object]]:
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                inner = getattr(pattern, "namespace", None)
                yield from walk(pattern.url_patterns, f"{namespace}{inner}:" if inner else namespace)
            elif getattr(pattern, "name", None):
                yield f"{namespace}{pattern.name}", pattern.callback  # type: ignore[attr-defined]

    return walk(get_resolver().url_patterns, "")


def test_the_views_that_read_from_the_replica_are_the_marked_ones() -> None:
    from apps.common.replica import replica_view_of

    marked = {name for name, view in url_views() if replica_view_of(view)}  # type: ignore[arg-type]
    assert marked == REPLICA_VIEWS
    assert "exports-focus" not in marked  # it streams after returning (docs/scaling.md)


@pytest.mark.django_db
def test_a_marked_view_s_get_reads_inside_replica_reads_and_an_unmarked_one_does_not() -> None:
    from django.test import Client

    from tests import factories

    reader = Client()
    reader.force_login(factories.finance_user("reader", role="viewer"))
    window = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}
    with override_settings(DATABASE_REPLICA_URL="postgresql://postgres@127.0.0.1:9/none"):
        marked, unmarked = reader.get("/api/v1/usage", window), reader.get("/api/v1/rejections")
    assert (marked.status_code, unmarked.status_code) == (200, 200)
    assert hasattr(marked.wsgi_request, "replica_reads")
    assert not hasattr(unmarked.wsgi_request, "replica_reads")
