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


def hold_rows(page: str) -> list[str]:
    return page[page.index('id="holds"') :].split("</table>")[0].split("<tr ")[1:]


def test_the_budgets_now_section_names_each_budgets_caller_in_both_languages(as_user) -> None:
    month = month_of(datetime.now(UTC).date())
    Budget.objects.create(business_line="support", caller="support-bot", month=month, tokens=10_000, hard=True)
    Budget.objects.create(business_line="support", month=month, tokens=20_000)
    finance = as_user("finance")

    english = finance.get("/budgets/").content.decode()
    chinese = finance.get("/budgets/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    (caller,) = [row for row in hold_rows(english) if "support-bot" in row]
    assert '<td class="text caller">support-bot</td>' in caller
    (line,) = [row for row in hold_rows(english) if "support-bot" not in row]
    assert '<td class="text caller">—</td>' in line
    assert ">Caller</th>" in english and "known by its API key" in english
    assert ">调用方</th>" in chinese and "按 API 密钥识别的应用" in chinese and ">Caller<" not in chinese
