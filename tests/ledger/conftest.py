from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from django.test import Client

from tests import factories


@pytest.fixture
def as_role(db: None) -> Callable[[str | None], Client]:
    """A logged-in test client for a role (None: anonymous)."""

    ids = itertools.count(1)

    def client(role: str | None) -> Client:
        browser = Client()
        if role is not None:
            browser.force_login(factories.finance_user(f"user-{role}-{next(ids)}", role=role))
        return browser

    return client
