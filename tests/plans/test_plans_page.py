"""Budgets and revenue edited on a page by finance: every business line of the month, saved all
or nothing through the planning services, copied from the month before, refused in a closed
month and outside a scoped user's lines."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import UserScope
from apps.auditlog.models import AuditEntry
from apps.ledger.models import CostCentre
from apps.ledger.services.periods import period_close
from apps.plans.models import Budget, Revenue
from apps.plans.planning import budget_set, revenue_set
from tests import factories
from tests.ledger.helpers import OCT, SEP, at

pytestmark = pytest.mark.django_db
PAGE, COPY = "/finance/plans/2026-10/", "/finance/plans/2026-10/copy/"
FIELDS = ("business_line", "budget_amount", "budget_currency", "budget_tokens", "revenue_amount", "revenue_currency")


def person(name: str, role: str = "finance", lines: list[str] | None = None) -> Client:
    user = factories.finance_user(name, role=role)
    if lines:
        UserScope.objects.create(user=user, business_lines=lines)
    client = Client()
    client.force_login(user)
    return client


def form(*rows: dict[str, Any]) -> dict[str, Any]:
    """The formset's POST: one dict per row (missing fields empty)."""
    data: dict[str, Any] = {"form-TOTAL_FORMS": len(rows), "form-INITIAL_FORMS": 0}
    for i, row in enumerate(rows):
        for name in FIELDS:
            data[f"form-{i}-{name}"] = row.get(name, "")
    return data


def budgets(month: date = OCT) -> dict[str, tuple[Any, ...]]:
    return {b.business_line: (b.amount, b.currency, b.tokens) for b in Budget.objects.filter(month=month)}


def test_it_lists_the_lines_of_the_books_the_cost_centres_and_the_budgets(as_role: Callable[..., Client]) -> None:
    factories.hourly_cost(hour=at(date(2026, 10, 5), 1), cost="3.00", dims={"business_line": "search"})
    CostCentre.objects.create(business_line="support", code="CC-7", name="Customer support")
    budget_set(business_line="ads", month=SEP, amount=Decimal("9"), currency="CNY")
    from apps.ledger.services.accrual import month_accrue

    month_accrue(month=OCT)

    page = as_role("finance").get(PAGE).content.decode()

    for line in ("search", "support", "Customer support", "ads"):
        assert f"{line}" in page
    assert "unassigned" not in page
    assert as_role("engineer").get(PAGE).status_code == 403


def test_it_sets_budgets_and_revenue_of_several_lines_at_once() -> None:
    finance = person("fiona")

    answer = finance.post(
        PAGE,
        form(
            {"business_line": "search", "budget_amount": "1200.50", "budget_currency": "CNY", "budget_tokens": "9000"},
            {"business_line": "support", "budget_tokens": "500", "revenue_amount": "80000", "revenue_currency": "CNY"},
        ),
        follow=True,
    )

    assert "2 business lines changed" in answer.content.decode()
    assert budgets() == {"search": (Decimal("1200.50"), "CNY", 9000), "support": (None, "", 500)}
    assert Revenue.objects.get(business_line="support", month=OCT).amount == Decimal("80000")
    entry = AuditEntry.objects.filter(model="plans.Budget").first()
    assert entry is not None and (entry.actor_name, entry.source) == ("fiona", "web")


def test_it_changes_and_removes_what_the_form_changed_and_leaves_the_rest() -> None:
    budget_set(business_line="search", month=OCT, amount=Decimal("10"), currency="CNY")
    budget_set(business_line="ads", month=OCT, tokens=100)
    revenue_set(business_line="ads", month=OCT, amount=Decimal("7"), currency="CNY")
    before = AuditEntry.objects.count()

    person("fiona").post(
        PAGE,
        form(
            {"business_line": "search", "budget_amount": "10.00", "budget_currency": "CNY"},  # unchanged
            {"business_line": "ads"},  # emptied: removed
        ),
    )

    assert budgets() == {"search": (Decimal("10.00"), "CNY", None)}
    assert not Revenue.objects.filter(business_line="ads").exists()
    assert AuditEntry.objects.count() == before + 2  # the two deletes; nothing written for search


def test_it_shows_each_rows_error_and_saves_nothing() -> None:
    finance = person("fiona")

    answer = finance.post(
        PAGE,
        form(
            {"business_line": "search", "budget_amount": "100", "budget_currency": "CNY"},
            {"business_line": "ads", "budget_amount": "-5", "budget_currency": "CNY"},
            {"business_line": "support", "revenue_amount": "40"},
        ),
    )

    page = answer.content.decode()
    assert answer.status_code == 400
    assert page.count('class="invalid"') == 2
    assert "greater than or equal to 0" in page and "a revenue amount needs its currency" in page
    assert budgets() == {} and not Revenue.objects.exists()
    assert 'value="100"' in page  # what was typed is kept


def test_it_refuses_a_closed_months_plans_with_the_closed_month_message() -> None:
    budget_set(business_line="search", month=OCT, amount=Decimal("10"), currency="CNY")
    period_close(month=OCT)
    finance = person("fiona")

    page = finance.get(PAGE).content.decode()
    answer = finance.post(PAGE, form({"business_line": "search", "budget_amount": "99", "budget_currency": "CNY"}))
    copied = finance.post(COPY, follow=True).content.decode()

    assert 'id="closed"' in page
    assert "2026-10 is closed; reopen it (admin, with a reason) to change its budget" in answer.content.decode()
    assert "2026-10 is closed; reopen it" in copied
    assert budgets() == {"search": (Decimal("10.00"), "CNY", None)}


def test_it_copies_last_months_budgets_and_revenue_into_the_lines_that_have_none() -> None:
    budget_set(business_line="search", month=SEP, amount=Decimal("100"), currency="CNY", tokens=5)
    budget_set(business_line="ads", month=SEP, amount=Decimal("50"), currency="USD")
    revenue_set(business_line="search", month=SEP, amount=Decimal("1000"), currency="CNY")
    budget_set(business_line="ads", month=OCT, amount=Decimal("70"), currency="USD")  # kept as it is

    answer = person("fiona").post(COPY, follow=True).content.decode()

    assert "Copied 2 budgets and revenue rows from 2026-09" in answer
    assert budgets() == {"search": (Decimal("100.00"), "CNY", 5), "ads": (Decimal("70.00"), "USD", None)}
    assert Revenue.objects.get(business_line="search", month=OCT).amount == Decimal("1000.00")


def test_a_scoped_finance_user_sees_and_edits_only_their_lines() -> None:
    budget_set(business_line="hidden-line", month=OCT, amount=Decimal("10"), currency="CNY")
    budget_set(business_line="hidden-line", month=SEP, amount=Decimal("10"), currency="CNY")
    budget_set(business_line="mine", month=SEP, amount=Decimal("20"), currency="CNY")
    scoped = person("sam", lines=["mine"])

    page = scoped.get(PAGE).content.decode()
    refused = scoped.post(
        PAGE,
        form(
            {"business_line": "mine", "budget_amount": "5", "budget_currency": "CNY"},
            {"business_line": "hidden-line", "budget_amount": "1", "budget_currency": "CNY"},
        ),
    )
    scoped.post(COPY)

    assert "hidden-line" not in page and "mine" in page
    assert refused.status_code == 400 and "hidden-line is outside your business lines" in refused.content.decode()
    assert budgets() == {"hidden-line": (Decimal("10.00"), "CNY", None), "mine": (Decimal("20.00"), "CNY", None)}


def test_the_budgets_page_links_finance_to_the_plans_page(as_role: Callable[..., Client]) -> None:
    link = 'href="/finance/plans/2026-10/"'

    assert link in as_role("finance").get("/budgets/?month=2026-10").content.decode()
    assert link not in as_role("engineer").get("/budgets/?month=2026-10").content.decode()
