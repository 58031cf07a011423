from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import UserScope
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.factories import record

_users = itertools.count(1)
T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)


def month_like_records() -> list[dict[str, Any]]:
    """A few hours of two business lines: ok, cached, timeouts, truncated outputs, an agent step."""
    found = []
    for hour in range(3):
        at = {"ts": (T0 + timedelta(hours=hour, minutes=5)).isoformat(), "prompt_hash": None}
        found += [
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
    return found


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
