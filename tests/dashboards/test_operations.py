"""The read-mostly operations pages: collectors (engineers and admins), budgets (scoped, money
by role)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.ledger.models import Budget
from apps.ledger.services.accrual import month_of
from tests.factories import record

pytestmark = pytest.mark.django_db


def test_collectors_show_last_seen_and_rejections(collector, as_user) -> None:
    collector.send([record(**{"tokens.prompt": -1})])

    page = as_user("engineer").get("/collectors/").content.decode()

    assert "source-" in page and ">1<" in page and "prompt" in page
    assert as_user("viewer").get("/collectors/").status_code == 403


def test_budgets_are_scoped_and_money_by_role(as_user) -> None:
    month = month_of(datetime.now(UTC).date())
    for line in ("support", "search"):
        Budget.objects.create(business_line=line, month=month, amount=Decimal(500), currency="CNY", tokens=10_000)

    scoped = as_user("engineer", lines=["support"]).get("/budgets/").content.decode()
    finance = as_user("finance").get("/budgets/").content.decode()

    assert ">support<" in scoped and ">search<" not in scoped and "500.00" not in scoped
    assert ">search<" in finance and "500.00 CNY" in finance
