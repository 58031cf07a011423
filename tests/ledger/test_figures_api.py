"""GET /api/v1/ledger/figures: a month's or a window's spend and tokens as the pages show them,
money only to those who see it, a scoped reader's own lines, bad windows refused."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.ledger.figures import spend
from apps.ledger.services.accrual import month_accrue
from tests import factories
from tests.conftest import login_as

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]

OCT = datetime(2026, 10, 1, tzinfo=UTC).date()


@pytest.fixture
def october() -> None:
    for day, line, cost in ((3, "support", "12.345"), (4, "search", "0.50"), (4, "", "1.00")):
        # The cost row first: its dim set keeps the business line column that hourly_class finds by digest.
        factories.hourly_cost(hour=datetime(2026, 10, day, 5, tzinfo=UTC), cost=cost, dims={"business_line": line})
        factories.hourly_class(hour=datetime(2026, 10, day, 5, tzinfo=UTC), tokens=1000, dims={"business_line": line})
    month_accrue(month=OCT)
    # Priced after the accrual: counted, and said to be pending.
    factories.hourly_cost(
        hour=datetime(2026, 10, 9, 5, tzinfo=UTC), cost="2.00", tokens=500, dims={"business_line": "support"}
    )
    factories.hourly_class(hour=datetime(2026, 10, 9, 5, tzinfo=UTC), tokens=500, dims={"business_line": "support"})


def test_a_months_figures_with_their_parts(october: None) -> None:
    found = login_as("finance").get("/api/v1/ledger/figures?period=2026-10").json()

    spend, tokens = found["spend"], found["tokens"]
    assert (spend["currency"], Decimal(spend["total"]), Decimal(spend["pending"])) == ("CNY", Decimal("15.85"), 2)
    assert Decimal(spend["unassigned"]) == Decimal("1.00") and Decimal(spend["idle"]) == 0
    assert tokens == {"total": 3500, "priced": 3500}


def test_a_window_of_hours_and_a_scoped_reader(october: None) -> None:
    scoped = login_as("finance", lines=["support"], money=True)
    found = scoped.get("/api/v1/ledger/figures?from=2026-10-03T00:00%2B00:00&to=2026-10-03T06:00%2B00:00").json()
    assert Decimal(found["spend"]["total"]) == Decimal("12.35") and found["tokens"]["total"] == 1000
    assert found["cost_centres"] == ["support"]
    month = scoped.get("/api/v1/ledger/figures?period=2026-10").json()
    assert Decimal(month["spend"]["total"]) == Decimal("14.35")  # 12.345 booked as 12.35, and 2.00 pending


def test_tokens_without_money_and_bad_windows_refused(october: None) -> None:
    engineer = login_as("engineer")
    found = engineer.get("/api/v1/ledger/figures?period=2026-10").json()
    assert found["spend"] is None and found["tokens"]["total"] == 3500
    for query in (
        "period=2026-13",
        "from=2026-10-03T00:00&to=2026-10-04T00:00",
        "from=2026-10-04T00:00Z&to=2026-10-03T00:00Z",
        "",
    ):
        assert engineer.get(f"/api/v1/ledger/figures?{query}").status_code == 400, query


def test_a_day_not_booked_yet_counts_its_share_of_the_months_rounding_as_the_journal_will() -> None:
    def priced(day: int) -> None:
        hour = datetime(2026, 10, day, 5, tzinfo=UTC)
        factories.hourly_cost(hour=hour, cost="0.004", dims={"business_line": "support"})
        factories.hourly_class(hour=hour, tokens=1000, dims={"business_line": "support"})

    def total() -> tuple[Decimal, Decimal]:
        spend = login_as("finance").get("/api/v1/ledger/figures?period=2026-10").json()["spend"]
        return Decimal(spend["total"]), Decimal(spend["pending"])

    priced(3)
    month_accrue(month=OCT)  # the 3rd books 0.004 as 0.00
    priced(4)
    # The 4th books the month's 0.008 rounded (0.01) less what the 3rd booked, not 0.004 rounded alone.
    assert total() == (Decimal("0.01"), Decimal("0.01"))
    month_accrue(month=OCT)
    assert total() == (Decimal("0.01"), 0)


def test_the_spend_of_a_model_the_platform_does_not_know_is_nothing(october: None) -> None:
    start, end = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)
    unknown = spend(start=start, end=end, model="no-such-model")
    assert (unknown.usage, unknown.idle, unknown.pending) == (0, 0, 0)
    assert spend(start=start, end=end).pending == 2  # the day not booked yet counts without the filter
