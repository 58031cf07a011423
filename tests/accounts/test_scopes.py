"""Business-line scopes and money visibility on the read APIs: a scoped user reads only its
business lines; cost is for finance and admin, or a user granted money."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.test import Client

from apps.accounts.models import UserScope
from apps.accounts.scopes import business_lines_of, sees_money
from apps.pricing.services import hours_price, price_set
from tests import factories
from tests.factories import record

T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
WINDOW = {"from": (T0 - timedelta(hours=1)).isoformat(), "to": (T0 + timedelta(hours=2)).isoformat()}


@pytest.fixture
def two_lines(collector) -> None:
    at = {"ts": (T0 + timedelta(minutes=10)).isoformat(), "prompt_hash": None}
    collector.send(
        [
            record(**at, dims={"business_line": "support", "feature": "faq"}),
            record(**at, dims={"business_line": "search", "feature": "rank"}),
            record(**at, dims={"business_line": "search", "feature": "rank"}, **{"outcome.status": "timeout"}),
        ]
    )
    price_set(
        model_pattern="qwen2.5-*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=T0 - timedelta(days=1),
    )
    hours_price(start=T0, end=T0 + timedelta(hours=1))


def login(role: str, *, lines: list[str] | None = None, money: bool = False) -> Client:
    user = factories.finance_user(f"{role}-{len(lines or [])}-{money}", role=role)
    if lines is not None or money:
        UserScope.objects.create(user=user, business_lines=lines or [], can_see_money=money)
    client = Client()
    client.force_login(user)
    return client


def get(client: Client, path: str, **params: str) -> dict:
    response = client.get(f"{path}?{urlencode(WINDOW | params)}")
    assert response.status_code == 200, response.content
    return response.json()


def test_it_lists_only_the_records_of_the_users_business_lines(two_lines) -> None:
    scoped, everyone = login("engineer", lines=["search"]), login("viewer")

    assert {r["dims"]["business_line"] for r in get(scoped, "/api/v1/records")["results"]} == {"search"}
    assert len(get(scoped, "/api/v1/records")["results"]) == 2
    assert get(scoped, "/api/v1/records", **{"dims.business_line": "support"})["results"] == []
    assert len(get(everyone, "/api/v1/records")["results"]) == 3


def test_it_sums_usage_only_over_the_users_business_lines(two_lines) -> None:
    scoped = login("viewer", lines=["support"])

    rows = get(scoped, "/api/v1/usage", granularity="month", group_by="business_line")["rows"]
    classes = get(scoped, "/api/v1/usage/classes", granularity="month", group_by="business_line")["rows"]

    assert {r["business_line"] for r in rows} == {"support"}
    assert {r["business_line"] for r in classes} == {"support"}
    assert sum(r["prompt"] for r in rows) == 1200


@pytest.mark.parametrize(
    ("role", "money", "shows_cost"),
    [("finance", False, True), ("admin", False, True), ("engineer", False, False), ("engineer", True, True)],
)
def test_it_shows_cost_only_to_finance_admin_or_a_granted_user(two_lines, role, money, shows_cost) -> None:
    rows = get(login(role, money=money), "/api/v1/usage/classes", granularity="month", group_by="class")["rows"]

    assert any(r["cost"] for r in rows) is shows_cost
    assert sum(r["tokens"] for r in rows) > 0


def test_scope_helpers(db) -> None:
    user = factories.finance_user("plain", role="viewer")
    assert (business_lines_of(user), sees_money(user)) == (None, False)

    UserScope.objects.create(user=user, business_lines=["b", "a"], can_see_money=True)
    user = type(user).objects.get(pk=user.pk)

    assert (business_lines_of(user), sees_money(user)) == (["a", "b"], True)


def test_it_edits_the_scope_in_the_user_admin(admin_client, django_user_model) -> None:
    user = django_user_model.objects.create_user("scoped", password="pw-for-tests-only")

    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/")

    assert page.status_code == 200 and b"can_see_money" in page.content
    assert admin_client.get("/admin/accounts/userscope/").status_code == 200
