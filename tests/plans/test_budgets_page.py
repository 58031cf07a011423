"""The budgets page: scoped by business line, money by role."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.ledger.services.accrual import month_of
from apps.plans.models import Budget
from tests import factories

pytestmark = pytest.mark.django_db


def test_budgets_are_scoped_and_money_by_role(as_user) -> None:
    month = month_of(datetime.now(UTC))
    for line in ("support", "search"):
        Budget.objects.create(business_line=line, month=month, amount=Decimal(500), currency="CNY", tokens=10_000)

    scoped = as_user("engineer", lines=["support"]).get("/budgets/").content.decode()
    finance = as_user("finance").get("/budgets/").content.decode()

    assert ">support<" in scoped and ">search<" not in scoped and "500.00" not in scoped
    assert ">search<" in finance and "500.00 CNY" in finance


def hold_rows(page: str) -> list[str]:
    return page[page.index('id="holds"') :].split("</table>")[0].split("<tr ")[1:]


def test_the_budgets_now_section_names_each_budgets_caller_in_both_languages(as_user) -> None:
    month = month_of(datetime.now(UTC))
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


def scoped_budget(**fields: str) -> dict[str, str]:
    month = f"{month_of(datetime.now(UTC)):%Y-%m}"
    return {"business_line": "support", "month": month, "tokens": "5000", "hard": "on"} | fields


def test_finance_sets_a_callers_budget_on_the_page_and_sees_it_held(as_user) -> None:
    finance = as_user("finance")

    response = finance.post("/budgets/scoped/", scoped_budget(caller="support-bot"), follow=True)
    again = finance.post("/budgets/scoped/", scoped_budget(caller="support-bot", tokens="7000"), follow=True)

    (budget,) = Budget.objects.all()
    assert (budget.business_line, budget.team, budget.caller, budget.tokens, budget.hard) == (
        "support", "", "support-bot", 7000, True,
    )  # fmt: skip
    assert response.status_code == 200 and "support caller=support-bot" in again.content.decode()
    (row,) = hold_rows(again.content.decode())
    assert '<td class="text caller">support-bot</td>' in row and 'id="scoped-budget"' in again.content.decode()


def test_the_page_refuses_a_scoped_budget_naming_neither_team_nor_caller_in_the_readers_language(as_user) -> None:
    finance = as_user("finance")

    page = finance.post("/budgets/scoped/", scoped_budget(), follow=True, HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert not Budget.objects.exists()
    assert "预算未设置" in page.content.decode() and "请填写团队、调用方或维度及其取值" in page.content.decode()


def test_only_finance_within_its_lines_sets_a_scoped_budget(as_user) -> None:
    engineer = as_user("engineer").post("/budgets/scoped/", scoped_budget(caller="support-bot"))
    elsewhere = as_user("finance", lines=["search"], money=True).post("/budgets/scoped/", scoped_budget(caller="x"))
    viewer_page = as_user("engineer").get("/budgets/").content.decode()

    assert (engineer.status_code, elsewhere.status_code) == (403, 403)
    assert not Budget.objects.exists() and 'id="scoped-budget"' not in viewer_page


def test_the_scoped_budget_form_suggests_the_readers_lines_teams_and_callers(as_user, collector) -> None:
    for line, team, caller in (("support", "cs-web", "support-bot"), ("search", "web", "search-app")):
        record = factories.record(dims={"business_line": line, "team": team, "caller": caller})
        assert collector.send([record]).json()["accepted"] == 1

    page = as_user("finance", lines=["support"], money=True).get("/budgets/").content.decode()

    form = page[page.index('id="scoped-budget"') :].split("</form>")[0]
    assert 'name="caller" maxlength="256" list="known-caller"' in form
    assert '<datalist id="known-caller"><option value="support-bot"></datalist>' in form
    assert '<datalist id="known-team"><option value="cs-web"></datalist>' in form
    assert '<datalist id="known-business_line"><option value="support"></datalist>' in form
    assert "search" not in form.split('id="known-business_line"')[1]


def test_finance_sets_a_users_budget_on_the_page_and_a_dim_the_rollup_does_not_keep_is_refused(
    as_user, settings
) -> None:
    finance = as_user("finance")

    refused = finance.post("/budgets/scoped/", scoped_budget(dim="user", value="u-42"), follow=True)
    settings.ROLLUP_DIMS = [*settings.ROLLUP_DIMS, "user"]
    page = finance.post("/budgets/scoped/", scoped_budget(dim="user", value="u-42"), follow=True).content.decode()

    assert "Budget not set" in refused.content.decode() and "not of &#x27;user&#x27;" in refused.content.decode()
    (budget,) = Budget.objects.all()
    assert (budget.business_line, budget.team, budget.caller, budget.dim, budget.value) == (
        "support", "", "", "user", "u-42",
    )  # fmt: skip
    assert "Budget support user=u-42" in page
    (row,) = hold_rows(page)
    assert '<td class="text dim">user=u-42</td>' in row and '<td class="text caller">—</td>' in row
    form = page[page.index('id="scoped-budget"') :].split("</form>")[0]
    assert 'name="dim"' in form and '<option value="user">' in form.split('id="known-dim"')[1]
