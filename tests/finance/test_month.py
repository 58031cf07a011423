"""The finance dashboard: finance and admin only, charts drawn with the local plotly.js, every
table downloadable."""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.test import Client

from apps.ledger.services.accrual import month_accrue
from apps.plans.models import Budget
from tests import factories
from tests.ledger.helpers import DAY1, SEP, at

pytestmark = pytest.mark.django_db
Role = Callable[[str | None], Client]
PAGE = "/finance/?month=2026-09"


@pytest.fixture
def booked() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="10.00")
    factories.hourly_cost(hour=at(DAY1, 2), cost="2.50", reason="waste.timeout", dims={"business_line": "search"})
    Budget.objects.create(business_line="search", month=SEP, amount=Decimal(100), currency="CNY", tokens=10_000)
    month_accrue(month=SEP)


@pytest.mark.parametrize("role", ["finance", "admin"])
def test_it_shows_spend_budget_trend_and_periods_to_finance(as_role: Role, booked: None, role: str) -> None:
    response = as_role(role).get(PAGE)

    assert response.status_code == 200
    html = response.content.decode()
    for title in (
        "Spend by account and cost centre, 2026-09 (CNY)",
        "Cost centres against the previous month and the budget",
        "Accounts against the previous month",
        "Waste in the books against the /waste/ page",
        "Trial balance, 2026-09",
        "Spend by account, last 12",
        "Periods",
    ):
        assert title in html
    assert 'src="/finance/plotly.min.js"' in html and "Plotly.newPlot" in html
    # Nothing loaded from another host (a CDN): a bare "cdn" could be in a random token.
    assert not re.search(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//""", html, re.IGNORECASE)


@pytest.mark.parametrize("role", ["viewer", "engineer"])
def test_it_keeps_the_dashboard_from_other_roles(as_role: Role, role: str) -> None:
    assert as_role(role).get(PAGE).status_code == 403


def test_it_sends_strangers_to_the_login(as_role: Role) -> None:
    response = as_role(None).get(PAGE)

    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_serves_plotly_js_from_the_installed_package(as_role: Role) -> None:
    response = as_role(None).get("/finance/plotly.min.js")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/javascript")
    assert b"plotly" in response.content[:2000].lower() and len(response.content) > 1_000_000


def test_it_sends_plotly_js_gzipped_to_a_browser_that_takes_it(as_role: Role) -> None:
    plain = as_role(None).get("/finance/plotly.min.js")
    response = as_role(None).get("/finance/plotly.min.js", HTTP_ACCEPT_ENCODING="gzip, deflate, br")

    assert response["Content-Encoding"] == "gzip" and "Accept-Encoding" in response["Vary"]
    assert int(response["Content-Length"]) == len(response.content) < len(plain.content) / 3
    assert gzip.decompress(response.content) == plain.content and "Content-Encoding" not in plain


@pytest.mark.parametrize(
    "table", ["spend", "budget", "accounts", "waste", "waste_reasons", "trial_balance", "trend", "periods", "findings"]
)
def test_it_downloads_every_table_of_the_page(as_role: Role, booked: None, table: str) -> None:
    response = as_role("finance").get(f"{PAGE}&download={table}")

    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.content.startswith("\ufeff".encode())
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[0]
    if table == "spend":
        assert rows == [
            [
                "Cost centre",
                "6401.01 Effective token expense (CNY)",
                "6401.02 Structural token expense (CNY)",
                "6401.03 Elastic token expense (CNY)",
                "6401.04 Waste token expense (CNY)",
                "6401.05 Shadow / overhead compute (CNY)",
                "6401.06 Idle capacity (CNY)",
                "Total (CNY)",
            ],
            ["customer-service", "10.00", "0", "0", "0", "0", "0", "10.00"],
            ["search", "0", "0", "0", "2.50", "0", "0", "2.50"],
            ["Total", "10.00", "0", "0", "2.50", "0", "0", "12.50"],
        ]
    if table == "budget":
        assert rows[2] == [
            "search",
            "2.50",
            "",
            "",
            "",
            "100.00",
            "100.00",  # September is over: all of its budget is due
            "-97.50",
            "-0.9750",
            "0.0250",
            "2.50",  # and its forecast is what it spent
            "10000",
            "1000",
            "0.1000",
        ]


def test_it_shows_a_scoped_user_only_its_business_lines(booked: None) -> None:
    from apps.accounts.models import UserScope
    from apps.ledger.models import Finding

    Finding.objects.create(
        period=SEP, kind="revenue_missing", business_line="customer-service", action="enter_revenue", message="cs"
    )
    user = factories.finance_user("scoped-finance", role="finance")
    UserScope.objects.create(user=user, business_lines=["search"])
    browser = Client()
    browser.force_login(user)

    def table(name: str) -> list[list[str]]:
        return list(csv.reader(io.StringIO(browser.get(f"{PAGE}&download={name}").content.decode("utf-8-sig"))))

    assert [row[0] for row in table("spend")[1:]] == ["search", "Total"]
    assert [row[0] for row in table("budget")[1:]] == ["search", "Lines with a budget", "Total"]
    assert table("trend")[1][-1] == "2.50" and len(table("findings")) == 1
    html = browser.get(PAGE).content.decode()
    assert browser.get(PAGE).status_code == 200 and "customer-service" not in html
