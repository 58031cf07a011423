from __future__ import annotations

import gzip
import importlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from apps.ingest import services
from tests import factories


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
