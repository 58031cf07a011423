"""A budget's reading in pure functions: the month's progress in days of the accounting zone (a
DST day is one day), the budget pro-rated to it, the forecast, and the variance judged by the
nature of what the budget limits."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from django.utils import translation

from apps.common.buckets import day_end, day_start, month_days, month_end, month_of, month_start, next_month
from apps.plans.variance import REVENUE, forecast, month_progress, pro_rated, variance

HOUR = timedelta(hours=1)


def this_month() -> date:
    return month_of(datetime.now(UTC))


def test_the_month_is_gone_by_whole_days_and_the_share_of_todays_hours() -> None:
    month = this_month()
    days = len(month_days(month))
    tenth = month.replace(day=10)

    at_midnight = month_progress(month=month, now=day_start(tenth))
    at_six = month_progress(month=month, now=day_start(tenth) + 6 * HOUR)

    assert at_midnight.elapsed_days == 9 and at_midnight.share == Fraction(9, days)
    assert at_six.elapsed_days == 9 + Fraction(6, 24)
    assert month_progress(month=month, now=month_start(month) - HOUR).elapsed_days == 0
    assert month_progress(month=month, now=month_end(month)).complete


@pytest.mark.books_in("Europe/Berlin")
def test_a_dst_day_counts_as_one_day_of_the_budget() -> None:
    march = date(this_month().year + 1, 3, 1)  # Europe/Berlin springs forward on March's last Sunday
    (short,) = [d for d in month_days(march) if day_end(d) - day_start(d) == 23 * HOUR]
    before, after = day_start(short), day_end(short)

    assert month_progress(month=march, now=before).elapsed_days == short.day - 1
    assert month_progress(month=march, now=after).elapsed_days == short.day
    # Halfway through its 23 hours is half the day.
    assert month_progress(month=march, now=before + timedelta(hours=11.5)).elapsed_days == short.day - Fraction(1, 2)
    assert pro_rated(Decimal("3100.00"), month_progress(month=march, now=after)) == Decimal(100 * short.day)


def test_a_budget_is_pro_rated_to_the_cent_and_tokens_to_the_token() -> None:
    month = this_month()
    days = len(month_days(month))
    progress = month_progress(month=month, now=day_start(month.replace(day=4)))

    assert pro_rated(Decimal("1000.00"), progress) == (Decimal(3000) / days).quantize(Decimal("0.01"))
    assert pro_rated(1_000_000, progress) == round(Fraction(3_000_000, days))
    assert pro_rated(None, progress) is None


def test_the_forecast_runs_the_pace_so_far_to_the_months_end() -> None:
    month = this_month()
    days = len(month_days(month))
    progress = month_progress(month=month, now=day_start(month.replace(day=6)))

    assert forecast(Decimal("50.00"), progress) == (Decimal(50) * days / 5).quantize(Decimal("0.01"))
    assert forecast(500, progress) == 100 * days
    assert forecast(Decimal(7), month_progress(month=month, now=month_start(month))) is None
    done = month_progress(month=month, now=month_start(next_month(month)))
    assert forecast(Decimal("123.45"), done) == Decimal("123.45")


def test_over_an_expense_budget_is_unfavourable_and_under_it_favourable() -> None:
    over, under, even = variance(Decimal(120), Decimal(100)), variance(Decimal(80), Decimal(100)), variance(5, 5)

    assert (over.amount, over.share, over.side, over.favourable, over.tone) == (  # type: ignore[union-attr]
        Decimal(20), Decimal("0.2"), "over", False, "unfavourable",
    )  # fmt: skip
    assert (under.amount, under.side, under.favourable, under.tone) == (  # type: ignore[union-attr]
        Decimal(-20), "under", True, "favourable",
    )  # fmt: skip
    with translation.override("en"):
        assert (even.side, even.favourable, even.word) == ("on", None, "on budget")  # type: ignore[union-attr]
    assert variance(Decimal(1), None) is None and variance(Decimal(1), Decimal(0)).share is None  # type: ignore[union-attr]


def test_a_revenue_budget_is_judged_the_other_way() -> None:
    assert variance(Decimal(120), Decimal(100), nature=REVENUE).favourable is True  # type: ignore[union-attr]
    assert variance(Decimal(80), Decimal(100), nature=REVENUE).favourable is False  # type: ignore[union-attr]
