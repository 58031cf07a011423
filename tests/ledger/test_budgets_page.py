"""The budgets page: scoped by business line, money by role."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.ledger.models import Budget
from apps.ledger.services.accrual import month_of

pytestmark = pytest.mark.django_db


def test_budgets_are_scoped_and_money_by_role(as_user) -> None:
    month = month_of(datetime.now(UTC).date())
    for line in ("support", "search"):
        Budget.objects.create(business_line=line, month=month, amount=Decimal(500), currency="CNY", tokens=10_000)

    scoped = as_user("engineer", lines=["support"]).get("/budgets/").content.decode()
    finance = as_user("finance").get("/budgets/").content.decode()

    assert ">support<" in scoped and ">search<" not in scoped and "500.00" not in scoped
    assert ">search<" in finance and "500.00 CNY" in finance
