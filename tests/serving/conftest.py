from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.tiny_model import build_tiny_model
from tests.processes import PlatformServer, VllmServer


def _database_name(suffix: str) -> str:
    base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform")
    return f"{urllib.parse.urlsplit(base).path.lstrip('/')}_{suffix}"


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
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, platform: PlatformServer
) -> Iterator[VllmServer]:
    """The real vLLM server with the whole instrumentation (stat logger + middleware)."""
    server = VllmServer(tmp_path_factory.mktemp("vllm"), tiny_model, platform).start()
    yield server
    server.stop()
