"""The ledger learns which days to book again from pricing's rollups themselves: the
statement-level trigger of migrations/ledger/0008 notes in ledger_dirtyday the UTC date of every
hour a statement on pricing_hourlycost or pricing_poolidlehour touched. Pricing never calls the
ledger; the beat job (recent_accrue) books what the trigger noted, a closed month through an
adjusting entry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from apps.ledger.models import DirtyDay, JournalEntry, Period
from apps.ledger.services.accrual import recent_accrue
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from apps.pricing.selectors import price_book_load
from apps.pricing.services import day_price, price_set, reprice_run
from tests import factories
from tests.ledger.helpers import DAY1, OCT, SEP, at, balanced, journal, spend

pytestmark = pytest.mark.django_db
AFTER_SEP = datetime(2026, 10, 3, tzinfo=UTC)
QWEN = "qwen2.5-*"


def marked() -> set:
    return set(DirtyDay.objects.values_list("day", flat=True))


@pytest.fixture
def priced_day() -> None:
    """One hour of DAY1 classified (1,000,000 input tokens, no business line) and priced at 2 per million."""
    factories.price_version(effective_from=at(SEP), prices={QWEN: ("2", "0.5", "6")})
    factories.hourly_class(hour=at(DAY1, 5), tokens=1_000_000)
    day_price(day=DAY1, book=price_book_load())


def test_pricing_a_day_marks_it_for_the_ledger_through_the_trigger(priced_day: None) -> None:
    assert HourlyCost.objects.get().cost == Decimal("2")
    assert marked() == {DAY1}
    DirtyDay.objects.all().delete()

    day_price(day=DAY1 + timedelta(days=3), book=price_book_load())  # a day without rows: nothing changes

    assert marked() == set()
    day_price(day=DAY1, book=price_book_load())  # the day's rows rewritten
    assert marked() == {DAY1}


def test_a_reprice_of_a_closed_month_is_booked_as_an_adjustment_by_the_beat_job(priced_day: None) -> None:
    period_close(month=SEP, now=AFTER_SEP)
    closed = journal()
    assert spend() == {("6401.01", "unassigned"): Decimal("2.00")}
    DirtyDay.objects.all().delete()
    price_set(model_pattern=QWEN, prices={"input": Decimal("3")}, effective_from=at(SEP))

    reprice_run(start=DAY1, end=DAY1 + timedelta(days=1))

    assert marked() == {DAY1}  # pricing never called the ledger: its trigger noted the day
    with time_machine.travel(datetime(2026, 10, 20, tzinfo=UTC), tick=False):
        recent_accrue()
    assert journal()[: len(closed)] == closed  # the closed month is untouched
    adjustment = JournalEntry.objects.get(kind="adjustment")
    assert (adjustment.period_id, adjustment.adjusts, adjustment.day) == (OCT, SEP, DAY1)
    assert spend(period_id=OCT) == {("6401.01", "unassigned"): Decimal("1.00")}
    assert spend() == {("6401.01", "unassigned"): Decimal("3.00")}
    assert Period.objects.get(month=SEP).status == "closed"
    assert marked() == set()
    assert balanced()
