"""The ledger over HTTP: trial balance, matrix, journal and drill-down, budgets, revenue,
periods; who may see money and who may change what."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.test import Client

from apps.ledger.models import JournalLine, Period
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.periods import period_close
from apps.plans.models import Budget, Revenue
from tests import factories
from tests.ledger.helpers import DAY1, SEP, account, at

pytestmark = pytest.mark.django_db
Role = Callable[[str | None], Client]
NOW = datetime(2026, 10, 20, tzinfo=UTC)


@pytest.fixture
def booked() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="10.000000000004", tokens=4000)
    factories.hourly_cost(hour=at(DAY1, 2), cost="2.50", reason="waste.timeout", dims={"business_line": "search"})
    month_accrue(month=SEP)


# --- who may do what ---------------------------------------------------------------------------

MONEY_ONLY = [
    "/api/v1/ledger/trial-balance?period=2026-09",
    "/api/v1/ledger/findings?period=2026-09",
    "/api/v1/ledger/revenue?period=2026-09",
    "/api/v1/exports/focus?period=2026-09",
]
TOKENS_FOR_ENGINEERS = [
    "/api/v1/ledger/matrix?from=2026-09",
    "/api/v1/ledger/journal?period=2026-09",
    "/api/v1/ledger/budget-vs-actual?period=2026-09",
    "/api/v1/ledger/budgets?period=2026-09",
    "/api/v1/ledger/periods",
    "/api/v1/ledger/accounts",
]


@pytest.mark.parametrize("url", MONEY_ONLY + TOKENS_FOR_ENGINEERS)
@pytest.mark.parametrize("role", ["finance", "admin"])
def test_it_shows_every_ledger_table_to_finance_and_admin(as_role: Role, booked: None, url: str, role: str) -> None:
    assert as_role(role).get(url).status_code == 200


@pytest.mark.parametrize("url", MONEY_ONLY)
@pytest.mark.parametrize("role", [None, "viewer", "engineer"])
def test_it_keeps_money_tables_from_everyone_else(as_role: Role, booked: None, url: str, role: str | None) -> None:
    assert as_role(role).get(url).status_code in (401, 403)


@pytest.mark.parametrize("url", TOKENS_FOR_ENGINEERS)
@pytest.mark.parametrize("role", [None, "viewer"])
def test_it_keeps_token_tables_from_viewers_and_strangers(as_role: Role, url: str, role: str | None) -> None:
    assert as_role(role).get(url).status_code in (401, 403)


MONEY_KEYS = {"amount", "debit", "credit", "debits", "credits", "cost", "exact", "balance"}
MONEY_KEYS |= {"budget_amount", "actual_amount", "amount_used"}


@pytest.mark.parametrize("url", TOKENS_FOR_ENGINEERS)
def test_it_shows_engineers_tokens_but_no_money(as_role: Role, booked: None, url: str) -> None:
    Budget.objects.create(business_line="search", month=SEP, amount=Decimal(100), currency="CNY", tokens=10_000)
    response = as_role("engineer").get(url)

    assert response.status_code == 200
    rows = response.json()["rows"]
    assert rows
    assert not [key for row in rows for key in row if key in MONEY_KEYS]


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("post", "/api/v1/ledger/periods/2026-09/close", {}),
        ("put", "/api/v1/ledger/budgets", {"business_line": "search", "month": "2026-09", "tokens": 5}),
        ("put", "/api/v1/ledger/revenue", {"business_line": "search", "month": "2026-09", "amount": "1"}),
    ],
)
@pytest.mark.parametrize("role", [None, "viewer", "engineer"])
def test_it_lets_only_finance_and_admin_close_and_set_budgets_and_revenue(
    as_role: Role, method: str, url: str, body: dict[str, str], role: str | None
) -> None:
    response = getattr(as_role(role), method)(url, body, content_type="application/json")

    assert response.status_code in (401, 403)
    assert not Period.objects.filter(status="closed").exists()
    assert not Budget.objects.exists() and not Revenue.objects.exists()


@pytest.mark.parametrize("role", [None, "viewer", "engineer", "finance"])
def test_it_lets_only_admins_reopen(as_role: Role, booked: None, role: str | None) -> None:
    period_close(month=SEP, now=NOW)

    response = as_role(role).post(
        "/api/v1/ledger/periods/2026-09/reopen", {"reason": "x"}, content_type="application/json"
    )

    assert response.status_code in (401, 403)
    assert Period.objects.get(month=SEP).status == "closed"


# --- the tables --------------------------------------------------------------------------------


def test_it_balances_the_trial_balance(as_role: Role, booked: None) -> None:
    body = as_role("finance").get("/api/v1/ledger/trial-balance?period=2026-09").json()

    (book,) = body["currencies"]
    assert (book["currency"], book["debits"], book["credits"], book["balanced"]) == ("CNY", "12.50", "12.50", True)
    assert {a["code"]: a["balance"] for a in book["accounts"]} == {
        "2241": "-12.50",
        "6401.01": "10.00",
        "6401.04": "2.50",
    }
    assert body["status"] == "open"


def test_it_downloads_every_table_as_csv(as_role: Role, booked: None) -> None:
    response = as_role("finance").get("/api/v1/ledger/trial-balance?period=2026-09&format=csv")

    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="trial-balance-2026-09.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert [(r["currency"], r["code"], r["debits"], r["credits"]) for r in rows] == [
        ("CNY", "2241", "0.00", "12.50"),
        ("CNY", "6401.01", "10.00", "0.00"),
        ("CNY", "6401.04", "2.50", "0.00"),
    ]
    for url in TOKENS_FOR_ENGINEERS:
        sep = "&" if "?" in url else "?"
        assert as_role("finance").get(f"{url}{sep}format=csv")["Content-Type"].startswith("text/csv"), url


def test_it_gives_the_account_by_cost_centre_by_month_matrix(as_role: Role, booked: None) -> None:
    rows = as_role("finance").get("/api/v1/ledger/matrix?from=2026-08&to=2026-10").json()["rows"]

    assert [(r["month"], r["account"], r["cost_centre"], r["amount"], r["tokens"]) for r in rows] == [
        ("2026-09", "6401.01", "customer-service", "10.00", 4000),
        ("2026-09", "6401.04", "search", "2.50", 1000),
    ]


def test_it_drills_down_from_a_journal_line_to_its_usage(as_role: Role, booked: None) -> None:
    lines = as_role("finance").get("/api/v1/ledger/journal?period=2026-09&account=6401.01").json()["rows"]
    (line,) = lines
    assert (line["debit"], line["exact"], line["tokens"], line["kind"]) == ("10.00", "10.000000000004", 4000, "accrual")

    usage = as_role("finance").get(line["usage"]).json()

    (row,) = usage["rows"]
    assert (row["reason"], row["component"], row["tokens"], row["cost"]) == (
        "effective.input",
        "uncached_prompt",
        4000,
        "10.000000000004",
    )
    assert row["mapping_rule"] in line["basis"]["rules"] and not usage["stale"]
    assert row["records"].startswith("/api/v1/records?from=2026-09-10T01")


def test_it_drills_down_to_the_rule_sets_that_classified_the_usage(as_role: Role) -> None:
    factories.dimset({"business_line": "customer-service"})
    factories.hourly_class(hour=at(DAY1, 1), tokens=2_000_000)
    factories.price_version(effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={"qwen*": ("1", "0.1", "4")})
    from apps.pricing.services import hours_price

    with time_machine.travel(NOW, tick=False):
        hours_price(start=at(DAY1), end=at(DAY1, 23))
    month_accrue(month=SEP)
    line = JournalLine.objects.get(account=account("6401.01"))

    (row,) = as_role("engineer").get(f"/api/v1/ledger/journal/{line.pk}/usage").json()["rows"]

    assert row["tokens"] == 2_000_000 and len(row["rulesets"]) == 1 and "cost" not in row


def test_it_sets_budgets_and_compares_them_with_actuals(as_role: Role, booked: None) -> None:
    finance = as_role("finance")
    response = finance.put(
        "/api/v1/ledger/budgets",
        {"business_line": "search", "month": "2026-09", "amount": "10.00", "currency": "CNY", "tokens": 4000},
        content_type="application/json",
    )
    assert response.status_code == 200, response.json()

    rows = finance.get("/api/v1/ledger/budget-vs-actual?period=2026-09").json()["rows"]

    search = next(r for r in rows if r["business_line"] == "search")
    assert (search["budget_amount"], search["actual_amount"], search["amount_used"]) == ("10.00", "2.50", "0.2500")
    # Booked: 1,000 processed tokens; a token budget counts records' prompt and completion, and
    # these books were priced from rollups with no records behind them.
    assert (search["budget_tokens"], search["actual_tokens"], search["used_tokens"]) == (4000, 1000, 0)
    assert search["tokens_used"] == "0.0000"
    # The page says the same as a share of the budget, and books the same tokens.
    page = finance.get("/budgets/?month=2026-09").content.decode()
    money = page[page.index('id="budgets"') :].split("</table>")[0]
    row = money.split('data-scope="search" data-group="')[1].split("</tr>")[0]
    assert 'data-figure="budget_used" data-value="0.250000"' in row and ">25.0%<" in row, row
    tokens = page[page.index('id="budget-tokens"') :].split("</table>")[0]
    row = tokens.split('data-scope="search" data-group="')[1].split("</tr>")[0]
    assert 'data-figure="tokens" data-value="1000" data-scope="search"' in row and ">0.0%<" in row, row
    # A line booked without a budget shows a dash where the budget would be, not a lone currency.
    other = money.split('data-group="unbudgeted"><td class="text">')[1].split("</tr>")[0]
    assert not other.startswith("search") and '<td class="none">—</td>' in other and " CNY<" not in other, other


def test_it_refuses_a_budget_without_amount_or_tokens(as_role: Role) -> None:
    response = as_role("finance").put(
        "/api/v1/ledger/budgets", {"business_line": "search", "month": "2026-09"}, content_type="application/json"
    )

    assert response.status_code == 400


def test_it_records_revenue_entered_by_finance(as_role: Role) -> None:
    response = as_role("finance").put(
        "/api/v1/ledger/revenue",
        {"business_line": "search", "month": "2026-09", "amount": "1000.00", "currency": "CNY"},
        content_type="application/json",
    )

    assert response.status_code == 200
    revenue = Revenue.objects.get()
    assert (revenue.amount, revenue.entered_by.username.startswith("user-finance")) == (Decimal("1000.00"), True)


def test_it_closes_and_reopens_over_the_api(as_role: Role, booked: None) -> None:
    with time_machine.travel(NOW, tick=False):
        closed = as_role("finance").post("/api/v1/ledger/periods/2026-09/close")
    assert closed.status_code == 200, closed.json()
    assert closed.json()["totals"][0]["booked"] == closed.json()["totals"][0]["priced"] == "12.50"

    reopened = as_role("admin").post(
        "/api/v1/ledger/periods/2026-09/reopen", {"reason": "vendor credit note"}, content_type="application/json"
    )

    assert reopened.status_code == 200 and reopened.json()["status"] == "open"
    periods = as_role("engineer").get("/api/v1/ledger/periods").json()["rows"]
    assert (periods[0]["month"], periods[0]["status"], periods[0]["days_booked"]) == ("2026-09", "open", 1)


def test_it_refuses_to_close_an_unfinished_month_over_the_api(as_role: Role) -> None:
    response = as_role("finance").post("/api/v1/ledger/periods/2999-01/close")

    assert response.status_code == 400
