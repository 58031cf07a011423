"""The finance page's waste reconciliation and the tokens figure keep their reading of a day the
journal holds as its rows stand (ledger.DayReading, apps/ledger/readings.py) and read it back
instead of the day's hourly rows, until a change to the day's classified or priced rows gives it
another key: the figures are those of the rows as they are now, whichever way they were read."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext

from apps.classification.models import HourlyClass
from apps.ledger import figures
from apps.ledger.models import DayReading
from apps.ledger.services.accrual import month_accrue
from apps.pricing.models import HourlyCost
from tests.conftest import Collector
from tests.finance.test_finance_page import NOV_DAY, books, finance, page_waste, price, records, send, table
from tests.ledger.helpers import NOV

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
__all__ = ["books"]  # the fixture, used by name
SUPPORT = "CC-1001 Customer support"


def waste_rows(name: str) -> dict[str, dict[str, str]]:
    return {r["Cost centre"]: r for r in table(finance(name), "waste")}


def test_a_kept_day_gives_the_same_figures_without_reading_its_rows_again(books: None) -> None:
    first = waste_rows("f1")
    kept = DayReading.objects.get(kind="waste", day=NOV_DAY)
    assert {line for _cur, line, *_ in kept.rows["priced"]} == {"support", "search"}

    with CaptureQueriesContext(connection) as queries:
        second = waste_rows("f2")

    assert second == first and first[SUPPORT]["Reconciliation"] == "agrees"
    read = [q["sql"] for q in queries if "LIKE 'waste.%'" in q["sql"] and HourlyCost._meta.db_table in q["sql"]]
    # Only the month's days without a kept reading are read from the rows: the hours before
    # NOV_DAY and after it, not its own.
    ranges = [
        (datetime.fromisoformat(lo), datetime.fromisoformat(hi))
        for sql in read
        for lo, hi in re.findall(r"c\.hour >= '([^']+)'::timestamptz AND c\.hour < '([^']+)'::timestamptz", sql)
    ]
    day = (datetime(2026, 11, 10, tzinfo=UTC), datetime(2026, 11, 11, tzinfo=UTC))
    assert ranges and not [r for r in ranges if r[0] < day[1] and day[0] < r[1]], ranges
    assert DayReading.objects.filter(kind="waste", day=NOV_DAY).count() == 1


def test_the_kept_reading_is_what_the_page_shows_until_the_day_changes(books: None, collector: Collector) -> None:
    waste_rows("f1")
    kept = DayReading.objects.get(kind="waste", day=NOV_DAY)
    kept.rows["tokens"] = [[line, n + 1000] for line, n in kept.rows["tokens"]]
    kept.save()
    tokens, _ = page_waste("support")
    assert int(waste_rows("f2")[SUPPORT]["Waste tokens (/waste/)"]) == tokens + 1000  # read back, not the rows

    send(collector, records(NOV_DAY, "support", ok=0, timeouts=1))  # classified: the hour waits to be priced
    tokens, _ = page_waste("support")
    waiting = waste_rows("f3")[SUPPORT]
    assert int(waiting["Waste tokens (/waste/)"]) == tokens and waiting["Reconciliation"] != "agrees"

    price()
    month_accrue(month=NOV)
    booked = waste_rows("f4")[SUPPORT]
    again = waste_rows("f5")[SUPPORT]
    assert booked == again and booked["Reconciliation"] == "agrees"
    assert int(booked["Waste tokens (ledger)"]) == tokens == int(booked["Waste tokens (/waste/)"])
    assert DayReading.objects.get(kind="waste", day=NOV_DAY).key != kept.key


def test_a_day_not_booked_is_read_and_not_kept(collector: Collector) -> None:
    send(collector, records(NOV_DAY, "support", ok=1, timeouts=2))
    price()  # priced, never accrued

    support = waste_rows("f1")["support"]

    assert int(support["Waste tokens (/waste/)"]) == page_waste("support")[0] > 0
    assert "not booked yet, on days not accrued: 2026-11-10" in support["Reconciliation"]
    assert not DayReading.objects.filter(day__gte=NOV, day__lt=date(2026, 12, 1)).exists()


def counted(start: datetime, end: datetime, line: str | None = None) -> figures.Tokens:
    """The window's classified and priced tokens summed from the rollups themselves."""
    found = []
    for model in (HourlyClass, HourlyCost):
        rows = model.objects.filter(hour__gte=start, hour__lt=end)
        if line is not None:
            rows = rows.filter(dims__business_line=line)
        found.append(rows.aggregate(n=Sum("tokens"))["n"] or 0)
    return figures.Tokens(*found)


def test_the_tokens_figure_reads_kept_days_and_the_rows_of_a_day_that_changed(
    books: None, collector: Collector
) -> None:
    month = (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    assert figures.tokens(start=month[0], end=month[1]) == counted(*month) and counted(*month).total > 0
    kept = DayReading.objects.get(kind="tokens", day=NOV_DAY)
    kept.rows = [[line, total + 7, priced] for line, total, priced in kept.rows]
    kept.save()
    assert figures.tokens(start=month[0], end=month[1]).total == counted(*month).total + 7 * len(kept.rows)

    send(collector, records(NOV_DAY, "support", ok=1, timeouts=1))  # classified, not priced yet
    assert figures.tokens(start=month[0], end=month[1]) == counted(*month)
    assert figures.tokens(start=month[0], end=month[1], lines=["support"]) == counted(*month, "support")
    price()
    month_accrue(month=NOV)
    assert figures.tokens(start=month[0], end=month[1]) == counted(*month)
    assert DayReading.objects.get(kind="tokens", day=NOV_DAY).key != kept.key
    cut = (datetime(2026, 11, 10, 2, tzinfo=UTC), datetime(2026, 11, 20, tzinfo=UTC))  # a partial first day
    assert figures.tokens(start=cut[0], end=cut[1]) == counted(*cut) != counted(*month)
