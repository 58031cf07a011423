from __future__ import annotations

import gzip
import importlib
import itertools
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from apps.accounts.models import UserScope
from apps.ingest import services
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.factories import record


@pytest.fixture(autouse=True)
def _fresh_reference_caches() -> Iterator[None]:
    # Ids cached by one test may belong to rows another test's cleanup removed.
    services._models.ids.clear()
    services._dimsets.ids.clear()
    yield
    services._models.ids.clear()
    services._dimsets.ids.clear()


def seeded_defaults() -> None:
    """What the data migrations write (the built-in reasons and rule set, the chart of accounts),
    written again where an earlier transactional test's flush removed it."""
    from django.apps import apps

    from apps.classification.models import Reason
    from apps.ledger.models import Account, ConfigVersion

    if not Reason.objects.exists():
        importlib.import_module("migrations.classification.0002_builtin_reasons_and_ruleset").seed(apps, None)
    if not Account.objects.exists():
        ConfigVersion.objects.get_or_create(id=1)
        importlib.import_module("migrations.ledger.0003_seed_chart").seed(apps, None)


@pytest.fixture
def truncate_records(transactional_db: None) -> Iterator[None]:
    """For tests that commit: ingest_record is not a Django-managed table, so flush skips it;
    the data migrations' rows, which flush does remove, are there again first."""
    seeded_defaults()
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

    def send(self, records: list[dict[str, Any]], *, gzipped: bool = False) -> Any:
        body = json.dumps({"records": records}).encode()
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
