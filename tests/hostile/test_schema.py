"""schemathesis against the OpenAPI schema the platform serves: every operation, generated
requests (valid and invalid), authenticated as an admin (basic auth) and, for ingest and the
budget state, with a collector key. No answer may be a 5xx, and every answer must be one the
schema declares (status code, content type, headers, body). HOSTILE_EXAMPLES sets the
examples per operation (`make fuzz`)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase
from hypothesis import settings as fuzz_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.accounts.models import CollectorKey
from tests import factories

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "8"))
PASSWORD = "pw-for-tests-only"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

# The schema /api/schema/ serves (test_the_served_schema_is_the_one_fuzzed checks it is this one).
schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = get_wsgi_application()
# The coverage phase sends every boundary case of every parameter (thousands of requests, not
# bounded by max_examples): the long form only. The short form runs the explicit examples and
# EXAMPLES generated cases per operation.
schema.config.phases.update(phases=["examples", "fuzzing", *(["coverage"] if EXAMPLES > 8 else [])])


CASES: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def _count_cases() -> Iterator[None]:
    yield
    if CASES:
        print(f"\nschemathesis: {sum(CASES.values())} cases over {len(CASES)} operations, {EXAMPLES} examples each")


@pytest.fixture
def in_process(db: None) -> Iterator[None]:
    """As django.test.Client does: the WSGI handler must not close the database connection at
    the end of a request, the test's transaction lives on it."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def credentials(in_process: None, django_user_model: Any) -> dict[str, str]:
    # Basic auth checks the password on every request: the tests hash with a fast hasher (tests/conftest.py).
    django_user_model.objects.create_superuser("fuzz-admin", "fuzz@example.com", PASSWORD)
    key = factories.collector_key("fuzz-collector")
    basic = base64.b64encode(f"fuzz-admin:{PASSWORD}".encode()).decode()
    return {"person": f"Basic {basic}", "collector": f"Bearer {key.secret}"}


@schema.parametrize()
@fuzz_settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # report a failure as found: shrinking re-runs requests for minutes
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_operation_answers_as_its_schema_says(case: Any, credentials: dict[str, str]) -> None:
    ingest = case.operation.method.upper() == "POST" and case.path == "/api/v1/records"
    who = "collector" if ingest or case.path == "/api/v1/budgets/state" else "person"
    case.call_and_validate(headers={"Authorization": credentials[who]}, checks=CHECKS)
    name = f"{case.operation.method.upper()} {case.operation.path}"
    CASES[name] = CASES.get(name, 0) + 1


def test_the_served_schema_is_the_one_fuzzed(admin_client: Any) -> None:
    response = admin_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    served = response.json()
    assert served["paths"].keys() == schema.raw_schema["paths"].keys()
    assert (
        served == SchemaGenerator().get_schema(request=None, public=True)
        or served["paths"] == schema.raw_schema["paths"]
    )


def test_every_ingest_key_is_one_collector(credentials: dict[str, str]) -> None:
    assert CollectorKey.objects.filter(name="fuzz-collector").count() == 1


@pytest.mark.parametrize("path", ["/api/v1/records", "/api/v1/usage", "/api/v1/usage/classes"])
@pytest.mark.parametrize(
    "when", ["0203-02-28T04:09:52+19:08", "0320-08-31T14:52:25-16:01", "0001-01-01T00:00:00+01:00"]
)
def test_a_time_offset_postgresql_cannot_hold_is_not_a_server_error(admin_client: Any, path: str, when: str) -> None:
    # Found by schemathesis: Python reads offsets up to 23:59, PostgreSQL refuses past 15:59.
    response = admin_client.get(path, {"from": when, "to": "2026-01-01T00:00:00Z"})

    assert response.status_code in (200, 400), response.content[:300]


@pytest.mark.parametrize(
    "path",
    ["/api/v1/rejections?source=a%00b", "/api/v1/records?model=%00", "/api/v1/ledger/journal?period=2026-01&model=x%00",
     "/api/v1/usage?from=2026-01-01&to=2026-01-02&dims.team=%00", "/api/v1/records?%00=1"],
)  # fmt: skip
def test_a_nul_in_the_query_string_is_a_400_not_a_server_error(admin_client: Any, path: str) -> None:
    # Found by schemathesis (make fuzz): PostgreSQL text cannot hold NUL; the query reached SQL.
    response = admin_client.get(path)

    assert response.status_code == 400
    assert "NUL" in response.json()["detail"]
