"""The budgets page read as finance reads it (issue 30, item 5), halfway through a month: each
budget compared with its part due by now, the variance signed and judged as an expense, the
forecast, and lines without a budget and idle capacity apart from the budgeted lines' total."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from tests.conftest import login_as
from tests.plans.budget_books import DAYS_GONE, TOKENS_BUDGET, HalfMonth, books, mid_month

pytestmark = pytest.mark.django_db

FIGURE = re.compile(r"<span ([^>]*data-figure=[^>]*)>")
ATTRIBUTE = re.compile(r'data-([a-z-]+)="([^"]*)"')


def table(page: str, table_id: str) -> str:
    return page[page.index(f'id="{table_id}"') :].split("</table>")[0]


def figures(page: str, table_id: str) -> dict[tuple[str, str], str]:
    """(figure, scope) -> its exact value, as a reader's tools find them."""
    found = {}
    for attrs in FIGURE.findall(table(page, table_id)):
        data = dict(ATTRIBUTE.findall(attrs))
        found[(data["figure"], data.get("scope", ""))] = data["value"]
    return found


def row(page: str, table_id: str, scope: str) -> str:
    """A row of the table, from its group on: 'budgeted"><td ...'."""
    return table(page, table_id).split(f'data-scope="{scope}" data-group="')[1].split("</tr>")[0]


@pytest.fixture
def half(collector: Any) -> Iterator[HalfMonth]:
    with time_machine.travel(mid_month(), tick=False):
        yield books(collector)


def test_each_budget_is_compared_with_its_part_due_by_now_and_judged_as_an_expense(half: HalfMonth) -> None:
    page = login_as("finance").get("/budgets/").content.decode()
    got = figures(page, "budgets")

    share = Decimal(DAYS_GONE) / half.days
    assert Decimal(re.search(r'data-share="([^"]+)"', page)[1]) == share.quantize(Decimal("0.000001"))  # type: ignore[index]
    for line in ("support", "search"):
        assert Decimal(got[("budget", line)]) == half.budgets[line]
        assert Decimal(got[("spend", line)]) == half.spend[line] > 0
        assert f'data-value="{half.due(line)}"' in row(page, "budgets", line)  # the budget to date
        assert Decimal(got[("variance", line)]) == half.spend[line] - half.due(line)
    support, search = row(page, "budgets", "support"), row(page, "budgets", "search")
    assert 'class="variance favourable" data-side="under"' in support and ">under<" in support
    assert f">{half.spend['support'] - half.due('support'):,.2f} <" in support  # its minus sign
    assert 'class="variance unfavourable" data-side="over"' in search and ">over<" in search
    assert f">+{half.spend['search'] - half.due('search'):,.2f} <" in search
    # Compared with the whole month's budget, search would have looked under it.
    assert half.spend["search"] < half.budgets["search"]
    forecast = (half.spend["support"] * half.days / DAYS_GONE).quantize(Decimal("0.01"))
    assert Decimal(got[("forecast", "support")]) == forecast


def test_lines_without_a_budget_and_idle_capacity_are_apart_from_the_budgeted_lines_total(half: HalfMonth) -> None:
    page = login_as("finance").get("/budgets/").content.decode()
    got = figures(page, "budgets")

    budgeted = half.spend["support"] + half.spend["search"]
    assert Decimal(got[("spend", "budgeted")]) == budgeted
    assert Decimal(got[("budget", "budgeted")]) == sum(half.budgets.values())
    assert Decimal(got[("budget_used", "budgeted")]) == (budgeted / sum(half.budgets.values())).quantize(
        Decimal("0.000001")
    )
    assert row(page, "budgets", "ads").startswith('unbudgeted"') and ("budget", "ads") not in got
    assert half.idle > 0 and Decimal(got[("spend", "idle")]) == half.idle and ("budget_used", "idle") not in got
    # Every part adds up to all spend, which has no budget to be a share of.
    assert Decimal(got[("spend", "all")]) == sum(half.spend.values()) + half.idle
    assert ("budget", "all") not in got and ("budget_used", "all") not in got


def test_a_reader_of_some_lines_sees_neither_idle_capacity_nor_money(half: HalfMonth) -> None:
    page = login_as("engineer", lines=["search"]).get("/budgets/").content.decode()

    assert 'id="budgets"' not in page  # money: a money reader's
    tokens = table(page, "budget-tokens")
    assert 'data-scope="search"' in tokens and 'data-scope="support"' not in tokens and "idle" not in tokens


def test_the_tokens_table_explains_its_two_token_figures(half: HalfMonth) -> None:
    page = login_as("finance").get("/budgets/").content.decode()
    got = figures(page, "budget-tokens")

    # Records of the factory: 1,200 prompt and 180 completion tokens each; 15 days of 1 to 3 a day.
    assert int(got[("tokens", "support:counted")]) == DAYS_GONE * 2 * 1380
    assert int(got[("tokens", "search:counted")]) == DAYS_GONE * 2 * 1380
    assert int(got[("tokens", "all")]) >= int(got[("tokens", "all:counted")]) > 0
    assert "rejected speculative drafts" in page and 'id="tokens-note"' in page
    # Support's token budget: half of what is due by now was counted, under it and favourable.
    assert int(got[("variance", "support")]) == DAYS_GONE * 2 * 1380 - DAYS_GONE * TOKENS_BUDGET < 0
    assert 'class="variance favourable" data-side="under"' in row(page, "budget-tokens", "support")
    # The API counts a token budget's use the same way.
    api = login_as("finance").get(f"/api/v1/ledger/budget-vs-actual?period={half.month:%Y-%m}").json()["rows"]
    (support,) = [r for r in api if r["business_line"] == "support"]
    assert support["used_tokens"] == int(got[("tokens", "support:counted")])
    assert Decimal(support["tokens_used"]) == Decimal(got[("budget_used", "support")]).quantize(Decimal("0.0001"))


def test_the_page_reads_in_chinese(half: HalfMonth) -> None:
    page = login_as("finance").get("/budgets/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert ">低于<" in row(page, "budgets", "support") and ">超出<" in row(page, "budgets", "search")
    for words in ("截至今日预算", "截至今日差异", "月末预测", "闲置产能", "有预算的业务线", "已入账词元", "已用词元"):
        assert words in page, words
    assert ">under<" not in page and "Budget to date" not in page
