from __future__ import annotations

import hashlib
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import workload
from devtools.tiny_model import build_tiny_model
from tests.processes import PlatformServer, VllmServer, worker_suffix


def _database_name(suffix: str) -> str:
    base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform")
    return f"{urllib.parse.urlsplit(base).path.lstrip('/')}_{suffix}{worker_suffix()}"


ADS_KEY, SEARCH_KEY = "sk-ads", "sk-search"  # the keys of the map's two keyed callers

# The map the test servers run with. Requests without a key (most tests) may choose among the
# lines the tests use; the two keyed callers are the attack tests' victim and attacker; the
# workload's apps are billed to their own lines.
ATTRIBUTION_MAP = f"""
[policy]
business_line = "allowed"

[default]
allowed = {{ business_line = ["customer-service", "rag", "search", "ads", "support"] }}

[callers.search-app]
tokens = ["{SEARCH_KEY}"]
dims = {{ business_line = "search", team = "search-web" }}

[callers.ads-app]
token_sha256 = ["{hashlib.sha256(ADS_KEY.encode()).hexdigest()}"]
dims = {{ business_line = "ads", team = "ads-web" }}

{workload.attribution_map()}
"""


BUDGET_POLL = 0.3  # seconds between the session server's polls of the budget state


def redis_url() -> str:
    """This worker's Redis database (tests/conftest.py): the gated server reserves in it."""
    return os.environ["CELERY_BROKER_URL"]


@pytest.fixture(scope="session")
def attribution_map(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("attribution") / "attribution.toml"
    path.write_text(ATTRIBUTION_MAP)
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformServer]:
    """A real costplatform (gunicorn, PostgreSQL) the instrumented server ships to."""
    server = PlatformServer(tmp_path_factory.mktemp("platform"), database=_database_name("serving")).setup()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def vllm_server(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, platform: PlatformServer, attribution_map: Path
) -> Iterator[VllmServer]:
    """The real vLLM server with the whole instrumentation (stat logger + middleware), holding
    hard budgets (polling the platform every BUDGET_POLL seconds: tests/serving/test_budgets_on_vllm.py
    sets them, and lifts them when done, so other tests' lines are served)."""
    extra = ["--attribution-map", str(attribution_map), "--budget-poll", str(BUDGET_POLL)]
    server = VllmServer(tmp_path_factory.mktemp("vllm"), tiny_model, platform, extra=extra).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gated_server(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, platform: PlatformServer, attribution_map: Path
) -> Iterator[VllmServer]:
    """A second instrumented server of the session's platform with the two gates the first one
    lacks: it checks keys itself (vLLM's --api-key, the map's two keys: a request names its caller
    by its key or is refused), and it reserves each request's largest use in this worker's Redis
    (`--budget-reserve`, the default hold: 3 s + 2 polls) before serving it. The key test of
    tests/serving/test_edge_on_vllm.py and the reservation test of test_budgets_on_vllm.py share
    it: one engine start, where each gate had its own. A request to it reserves only against a
    hard budget, which the tests set and lift (test_budgets_on_vllm.held_server)."""
    extra = ["--attribution-map", str(attribution_map), "--api-key", ADS_KEY, SEARCH_KEY,
             "--budget-poll", str(BUDGET_POLL), "--budget-reserve", redis_url()]  # fmt: skip
    server = VllmServer(tmp_path_factory.mktemp("vllm-gated"), tiny_model, platform, extra=extra).start()
    yield server
    server.stop()
