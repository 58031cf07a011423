"""One figure everywhere, on books of their own: three business lines and tokens of none, a CNY price
book, a USD one with a day that has no rate, a pool with idle hours; a month booked, then hours priced
after it (the figures and the pages of tests/test_one_truth.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.test import Client

from apps.pricing.services import hours_price
from tests.conftest import login_as
from tests.factories import record
from tests.test_one_truth import expense_posted, get, one, overview

OCT_ = date(2026, 10, 1)
LINES = ("support", "search", "legal")


@pytest.fixture
def own_books(collector: Any, settings: Any) -> None:
    settings.ACCOUNTING_TZ = "UTC"
    import random

    from apps.currencies.rates import rate_set
    from apps.ledger.services.accrual import month_accrue
    from apps.pricing.services import price_set
    from tests import factories

    pick = random.Random(30)
    sent = []
    for day in range(1, 11):
        for hour in pick.sample(range(24), 6):
            at = datetime(2026, 10, day, hour, pick.randrange(60), tzinfo=UTC)
            line = pick.choice([*LINES, ""])
            sent.append(
                record(
                    ts=at.isoformat(),
                    model=pick.choice(["qwen2.5-7b-instruct", "gpt-4o", "deepseek-v3"]),
                    dims={"business_line": line} if line else {"feature": "batch"},
                    prompt_hash=None,
                    **{"tokens.prompt": pick.randrange(800, 4000), "tokens.completion": pick.randrange(10, 900)},
                )
            )
    response = collector.send(sent, on_time=True)
    assert response.status_code == 200 and response.json()["accepted"] == len(sent), response.content
    since = datetime(2026, 9, 1, tzinfo=UTC)
    price_set(
        model_pattern="gpt-4o*",
        prices={"input": Decimal("2.5"), "cached_input": Decimal("1.25"), "output": Decimal("10")},
        effective_from=since,
        currency="USD",
    )
    price_set(
        model_pattern="deepseek-*",
        prices={"input": Decimal("2"), "cached_input": Decimal("0.5"), "output": Decimal("8")},
        effective_from=since,
    )
    factories.cost_pool(model_patterns=["qwen2.5-*"], effective_from=since, capacity=50_000)
    for day in range(1, 11):
        if day != 7:  # the 7th has no USD rate: its gpt-4o cost waits for one
            rate_set(day=date(2026, 10, day), currency="USD", rate=f"7.{day}", source="test")
    with time_machine.travel(datetime(2026, 10, 11, 0, 30, tzinfo=UTC), tick=True):
        hours_price(start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 10, 8, tzinfo=UTC))
        month_accrue(month=OCT_)  # the 1st to the 7th booked
        hours_price(start=datetime(2026, 10, 8, tzinfo=UTC), end=datetime(2026, 10, 11, tzinfo=UTC))  # not booked


def figures_of(client: Client, line: str = "") -> dict[str, Decimal]:
    pages = {
        "overview": overview(client, OCT_, line),
        "finance": get(client, f"/finance/?month={OCT_:%Y-%m}"),
    }
    return {name: one(page, "spend") for name, page in pages.items()}


@pytest.mark.django_db
def test_books_of_their_own_are_one_figure_before_and_after_the_journal_books_them(own_books: None) -> None:
    from apps.ledger.services.accrual import month_accrue
    from apps.pricing.models import HourlyCost, PoolIdleHour

    admin = login_as("admin")
    before = figures_of(admin)
    assert len(set(before.values())) == 1, before
    # An independent reference: the priced rows and idle hours, each converted at its day's rate.
    rates = {day: Decimal(f"7.{day}") for day in range(1, 11) if day != 7}
    reference = Decimal(0)
    for row in HourlyCost.objects.filter(hour__gte=datetime(2026, 10, 1, tzinfo=UTC)):
        if row.currency == "CNY":
            reference += row.cost
        elif row.hour.day in rates:
            reference += row.cost * rates[row.hour.day]
    reference += sum((h.idle for h in PoolIdleHour.objects.all()), Decimal(0))
    # The journal rounds per line and day; the pending days round once: a few fen at most.
    assert abs(before["overview"] - reference) <= Decimal("0.50"), (before, reference)
    overview_page = overview(admin, OCT_)
    assert "waits for an exchange rate" in overview_page  # the 7th's gpt-4o cost, not in the total
    assert expense_posted(admin, OCT_) < before["finance"]  # the 8th to the 10th are not booked yet

    with time_machine.travel(datetime(2026, 10, 11, 0, 40, tzinfo=UTC), tick=True):
        month_accrue(month=OCT_)
    after = figures_of(admin)
    assert len(set(after.values())) == 1 and after["finance"] == expense_posted(admin, OCT_), after
    assert abs(after["finance"] - before["finance"]) <= Decimal("0.05")  # the same money, now rounded by day

    for line in LINES:
        scoped = login_as("finance", lines=[line], money=True)
        seen = {**figures_of(scoped), "overview of the line": one(overview(admin, OCT_, line), "spend")}
        seen["trial balance"] = expense_posted(scoped, OCT_)
        assert len(set(seen.values())) == 1, (line, seen)
