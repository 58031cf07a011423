"""Budgets and revenue of a closed month are its books: the services, the API, the admin and
the database all refuse to change them until the month is reopened (admin, with a reason)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.test import Client

from apps.ledger.services.periods import period_close, period_reopen
from apps.plans.models import Budget, Revenue
from apps.plans.planning import PlanningError, budget_set, revenue_set
from tests import factories
from tests.ledger.helpers import OCT, SEP

pytestmark = pytest.mark.django_db
Role = Callable[[str | None], Client]
NOW = datetime(2026, 11, 20, tzinfo=UTC)
BUDGET_CLOSED = "2026-09 is closed; reopen it (admin, with a reason) to change its budget"
REVENUE_CLOSED = "2026-09 is closed; reopen it (admin, with a reason) to change its revenue"


@pytest.fixture
def closed_sep() -> Budget:
    """September closed with a budget and a revenue entered before the close."""
    budget = budget_set(business_line="search", month=SEP, amount=Decimal(100), currency="CNY")
    revenue_set(business_line="search", month=SEP, amount=Decimal(1000), currency="CNY")
    period_close(month=SEP, now=NOW)
    return budget


def _staff_admin() -> Client:
    user = factories.finance_user("staff-admin", role="admin")
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    return browser


def _raw(sql: str, params: list[object] | None = None) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


# --- services ------------------------------------------------------------------------------------


def test_it_refuses_to_change_a_closed_months_budget_in_the_service(closed_sep: Budget) -> None:
    with pytest.raises(PlanningError, match=re.escape(BUDGET_CLOSED)):
        budget_set(business_line="search", month=SEP, amount=Decimal(1), currency="CNY")
    with pytest.raises(PlanningError, match=re.escape(BUDGET_CLOSED)):
        budget_set(business_line="ads", month=SEP, tokens=10)

    assert list(Budget.objects.values_list("business_line", "amount")) == [("search", Decimal(100))]


def test_it_refuses_to_change_a_closed_months_revenue_in_the_service(closed_sep: Budget) -> None:
    with pytest.raises(PlanningError, match=re.escape(REVENUE_CLOSED)):
        revenue_set(business_line="search", month=SEP, amount=Decimal(1), currency="CNY")

    assert list(Revenue.objects.values_list("business_line", "amount")) == [("search", Decimal(1000))]


def test_it_takes_budgets_again_once_the_month_is_reopened(closed_sep: Budget) -> None:
    period_reopen(month=SEP, user=factories.finance_user("root", role="admin"), reason="budget was wrong")

    budget_set(business_line="search", month=SEP, amount=Decimal(120), currency="CNY")
    revenue_set(business_line="search", month=SEP, amount=Decimal(900), currency="CNY")

    assert Budget.objects.get().amount == Decimal(120) and Revenue.objects.get().amount == Decimal(900)


def test_it_still_takes_budgets_of_open_months(closed_sep: Budget) -> None:
    budget_set(business_line="search", month=OCT, amount=Decimal(7), currency="CNY")

    assert Budget.objects.filter(month=OCT).get().amount == Decimal(7)


# --- API -----------------------------------------------------------------------------------------


def test_it_refuses_a_closed_months_budget_over_the_api(closed_sep: Budget, as_role: Role) -> None:
    body = {"business_line": "search", "month": "2026-09", "amount": "1.00", "currency": "CNY"}

    response = as_role("finance").put("/api/v1/ledger/budgets", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"budget": [BUDGET_CLOSED]}
    assert Budget.objects.get().amount == Decimal(100)


def test_it_refuses_a_closed_months_revenue_over_the_api(closed_sep: Budget, as_role: Role) -> None:
    body = {"business_line": "ads", "month": "2026-09", "amount": "5.00", "currency": "CNY"}

    response = as_role("finance").put("/api/v1/ledger/revenue", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"revenue": [REVENUE_CLOSED]}
    assert Revenue.objects.count() == 1


# --- admin ---------------------------------------------------------------------------------------


def test_it_refuses_to_add_a_closed_months_budget_in_the_admin(closed_sep: Budget) -> None:
    form = {"business_line": "ads", "month": "2026-09-01", "currency": "CNY", "amount": "5", "tokens": ""}

    response = _staff_admin().post("/admin/plans/budget/add/", form)

    assert response.status_code == 200  # the form again, with the error
    assert BUDGET_CLOSED in response.content.decode()
    assert not Budget.objects.filter(business_line="ads").exists()


def test_it_refuses_to_edit_a_closed_months_budget_in_the_admin(closed_sep: Budget) -> None:
    form = {"business_line": "search", "month": "2026-09-01", "currency": "CNY", "amount": "1", "tokens": ""}

    response = _staff_admin().post(f"/admin/plans/budget/{closed_sep.pk}/change/", form)

    assert BUDGET_CLOSED in response.content.decode()
    assert Budget.objects.get().amount == Decimal(100)


def test_it_refuses_to_move_a_budget_out_of_a_closed_month_in_the_admin(closed_sep: Budget) -> None:
    form = {"business_line": "search", "month": "2026-10-01", "currency": "CNY", "amount": "100", "tokens": ""}

    response = _staff_admin().post(f"/admin/plans/budget/{closed_sep.pk}/change/", form)

    assert BUDGET_CLOSED in response.content.decode()
    assert Budget.objects.get().month == SEP


def test_it_refuses_to_edit_a_closed_months_revenue_in_the_admin(closed_sep: Budget) -> None:
    revenue = Revenue.objects.get()
    form = {"business_line": "search", "month": "2026-09-01", "currency": "CNY", "amount": "1"}

    response = _staff_admin().post(f"/admin/plans/revenue/{revenue.pk}/change/", form)

    assert REVENUE_CLOSED in response.content.decode()
    assert Revenue.objects.get().amount == Decimal(1000)


def test_it_refuses_to_delete_a_closed_months_budget_in_the_admin(closed_sep: Budget) -> None:
    browser = _staff_admin()

    single = browser.post(f"/admin/plans/budget/{closed_sep.pk}/delete/", {"post": "yes"})
    bulk = browser.post(
        "/admin/plans/budget/", {"action": "delete_selected", "_selected_action": [closed_sep.pk], "post": "yes"}
    )

    assert (single.status_code, bulk.status_code) == (403, 403)
    assert Budget.objects.filter(pk=closed_sep.pk).exists()


def test_it_refuses_to_delete_a_closed_months_revenue_in_the_admin(closed_sep: Budget) -> None:
    revenue = Revenue.objects.get()

    response = _staff_admin().post(f"/admin/plans/revenue/{revenue.pk}/delete/", {"post": "yes"})

    assert response.status_code == 403 and Revenue.objects.filter(pk=revenue.pk).exists()


def test_it_still_deletes_an_open_months_budget_in_the_admin(closed_sep: Budget) -> None:
    october = budget_set(business_line="search", month=OCT, tokens=5)

    response = _staff_admin().post(f"/admin/plans/budget/{october.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302 and not Budget.objects.filter(pk=october.pk).exists()


# --- the database, whoever writes ----------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE ledger_budget SET amount = 1",
        "DELETE FROM ledger_budget",
        "INSERT INTO ledger_budget (business_line, month, currency, tokens, updated_at) "
        "VALUES ('ads', '2026-09-01', '', 5, now())",
        "UPDATE ledger_budget SET month = '2026-10-01'",
    ],
)
def test_it_refuses_a_closed_months_budget_in_the_database(closed_sep: Budget, sql: str) -> None:
    with pytest.raises(DatabaseError, match=re.escape(BUDGET_CLOSED)):
        _raw(sql)


@pytest.mark.parametrize("sql", ["UPDATE ledger_revenue SET amount = 1", "DELETE FROM ledger_revenue"])
def test_it_refuses_a_closed_months_revenue_in_the_database(closed_sep: Budget, sql: str) -> None:
    with pytest.raises(DatabaseError, match=re.escape(REVENUE_CLOSED)):
        _raw(sql)


def test_it_lets_a_user_who_set_a_closed_months_budget_be_deleted(closed_sep: Budget) -> None:
    user = factories.finance_user("leaver")
    budget_set(business_line="ads", month=OCT, tokens=5, user=user)
    period_close(month=OCT, now=NOW)
    assert Budget.objects.get(month=OCT).updated_by == user

    User.objects.filter(pk=user.pk).delete()

    assert Budget.objects.get(month=OCT).updated_by is None
