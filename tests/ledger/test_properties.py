"""Properties on random data: every entry balances, a month's entries equal its priced total
(USD rows converted at their day's rate into the functional CNY) rounded once, every line is
within one unit of its exact amount, before and after a close and a re-price of the closed month."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.currencies.models import ExchangeRate
from apps.ledger.models import JournalEntry, JournalLine
from apps.ledger.rounding import day_amount, largest_remainder, round_half_up
from apps.ledger.services.accrual import month_accrue, next_month
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from tests import factories
from tests.ledger.helpers import OCT, SEP, at

pytestmark = pytest.mark.books_in("UTC")  # its days and months are UTC's

EXACT = st.decimals(min_value=0, max_value=1000, places=12, allow_nan=False, allow_infinity=False)


@given(amounts=st.lists(EXACT, min_size=1, max_size=30), carry=EXACT)
def test_it_shares_a_day_among_its_lines_exactly(amounts: list[Decimal], carry: Decimal) -> None:
    total = day_amount(carry=carry, exact=sum(amounts, Decimal(0)), places=2)
    shares = largest_remainder(amounts, total, 2)

    assert sum(shares, Decimal(0)) == total
    assert all(
        Decimal(0) <= s - a.quantize(Decimal("0.01"), "ROUND_FLOOR") <= Decimal("0.01")
        for s, a in zip(shares, amounts, strict=True)
    )


@given(days=st.lists(EXACT, min_size=1, max_size=31))
def test_it_books_a_month_as_its_total_rounded_once(days: list[Decimal]) -> None:
    carry, booked = Decimal(0), Decimal(0)
    for exact in days:
        booked += day_amount(carry=carry, exact=exact, places=2)
        carry += exact

    assert booked == round_half_up(sum(days, Decimal(0)), 2)


ROW = st.tuples(
    st.integers(0, 60),  # day from 2026-09-01 (September and October)
    st.integers(0, 23),
    st.sampled_from(["customer-service", "search", ""]),
    st.sampled_from(
        ["effective.input", "effective.structural", "cache.prefix_cache", "waste.error", "shadow.recompute"]
    ),
    EXACT,
    st.sampled_from(["CNY", "USD"]),
)


def _write(rows: list[tuple[int, int, str, str, Decimal, str]]) -> None:
    seen = set()
    for day, hour, bl, reason, cost, currency in rows:
        if (day, hour, bl, reason, currency) in seen:  # the hourly key is unique
            continue
        seen.add((day, hour, bl, reason, currency))
        dims = {"business_line": bl} if bl else {"team": "t"}
        model = "qwen" if currency == "CNY" else "gpt"
        factories.hourly_cost(
            hour=at(SEP, hour) + timedelta(days=day),
            cost=cost,
            reason=reason,
            dims=dims,
            model=model,
            currency=currency,
        )


def _rate(day: date) -> Decimal:
    """A USD/CNY rate that moves from day to day."""
    return Decimal("7.1") + Decimal(day.day) / 1000


def _rates() -> None:
    days = [SEP + timedelta(days=i) for i in range(61)]
    ExchangeRate.objects.bulk_create(
        ExchangeRate(day=d, currency="USD", to="CNY", rate=_rate(d), source="test") for d in days
    )


def _priced(month: date) -> dict[str, Decimal]:
    """The month's priced total in CNY: each USD row at its day's rate (to the rollup's 12 places)."""
    start, end = (
        datetime.combine(month, datetime.min.time(), UTC),
        datetime.combine(next_month(month), datetime.min.time(), UTC),
    )
    rows = HourlyCost.objects.filter(hour__gte=start, hour__lt=end).values_list("hour", "cost", "currency")
    total = sum(
        (cost if currency == "CNY" else (cost * _rate(hour.date())).quantize(Decimal(1).scaleb(-12)))
        for hour, cost, currency in rows
    )
    return {"CNY": round_half_up(Decimal(total), 2)} if rows else {}


def _booked(month: date) -> dict[str, Decimal]:
    """Net expense of the month's usage days, wherever posted (adjustments included)."""
    rows = (
        JournalLine.objects.filter(day__gte=month, day__lt=next_month(month), account__kind="expense")
        .values("currency")
        .annotate(d=Sum("debit"), c=Sum("credit"))
    )
    return {r["currency"]: r["d"] - r["c"] for r in rows if r["d"] - r["c"] or r["currency"] in _priced(month)}


def _assert_books() -> None:
    per_entry: dict[int, Decimal] = defaultdict(Decimal)
    for entry_id, debit, credit in JournalLine.objects.values_list("entry_id", "debit", "credit"):
        per_entry[entry_id] += debit - credit
    assert set(per_entry.values()) <= {Decimal(0)}
    for month in (SEP, OCT):
        assert _booked(month) == _priced(month)
    for line in JournalLine.objects.filter(entry__kind="accrual", account__kind="expense"):
        assert abs(line.debit - Decimal(line.basis["exact"])) < Decimal("0.01")


@pytest.mark.django_db
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=40), changes=st.lists(ROW, max_size=15))
def test_it_balances_and_books_each_month_exactly_through_a_close_and_a_reprice(
    rows: list[tuple[int, int, str, str, Decimal, str]], changes: list[tuple[int, int, str, str, Decimal, str]]
) -> None:
    with transaction.atomic():
        _rates()
        _write(rows)
        month_accrue(month=SEP)
        month_accrue(month=OCT)
        _assert_books()

        period_close(month=SEP, now=datetime(2026, 10, 5, tzinfo=UTC))
        closed = list(JournalLine.objects.filter(period_id=SEP).order_by("pk").values_list("pk", "debit", "credit"))
        # Re-price or add rows of September (the closed month) and October; then accrue both again.
        for day, hour, _bl, reason, _cost, currency in changes:
            HourlyCost.objects.filter(
                hour=at(SEP, hour) + timedelta(days=day), reason__name=reason, currency=currency
            ).delete()
        _write(changes)
        month_accrue(month=SEP)
        month_accrue(month=OCT)

        _assert_books()
        event(f"adjusting entries: {min(JournalEntry.objects.filter(kind='adjustment').count(), 3)}")
        assert (
            list(JournalLine.objects.filter(period_id=SEP).order_by("pk").values_list("pk", "debit", "credit"))
            == closed
        )
        assert not JournalEntry.objects.filter(kind="adjustment").exclude(period_id=OCT, adjusts=SEP).exists()
        transaction.set_rollback(True)
