"""Closing months: the lock is PostgreSQL's, later changes become adjusting entries, reopening
is for admins and recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from apps.classification.models import Reason
from apps.ledger.models import JournalEntry, JournalLine, Period, PeriodEvent
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.periods import PeriodError, month_totals, period_close, period_reopen
from apps.pricing.models import HourlyCost
from tests import factories
from tests.ledger.helpers import DAY1, NOV, OCT, SEP, at, balanced, journal, spend

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
AFTER_SEP = datetime(2026, 10, 3, tzinfo=UTC)
AFTER_OCT = datetime(2026, 11, 3, tzinfo=UTC)


@pytest.fixture
def closed_sep() -> HourlyCost:
    row = factories.hourly_cost(hour=at(DAY1, 1), cost="10.00")
    period_close(month=SEP, now=AFTER_SEP)
    return row


def _raw(sql: str, params: list[object] | None = None) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params or [])


# --- closing ---------------------------------------------------------------------------------


def test_it_completes_the_journal_and_locks_the_month_at_close() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="10.00")

    result = period_close(month=SEP, now=AFTER_SEP)

    assert Period.objects.get(month=SEP).status == "closed"
    assert spend() == {("6401.01", "customer-service"): Decimal("10.00")}
    assert result.accrual.days_computed == 1
    (total,) = result.totals
    assert (total.debits, total.credits, total.booked, total.priced) == (Decimal("10.00"),) * 4
    assert PeriodEvent.objects.get().action == "close"


def test_it_closes_from_the_command_line() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="10.00")

    call_command("close_period", "2026-09")

    assert Period.objects.get(month=SEP).status == "closed"


def test_it_refuses_to_close_a_month_that_has_not_ended_or_is_closed(closed_sep: HourlyCost) -> None:
    with pytest.raises(PeriodError, match="has not ended"):
        period_close(month=OCT, now=datetime(2026, 10, 31, 23, tzinfo=UTC))
    with pytest.raises(PeriodError, match="already closed"):
        period_close(month=SEP, now=AFTER_OCT)


# --- the lock is the database's ----------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE ledger_journalline SET debit = debit + 1 WHERE period = %s AND debit > 0",
        "DELETE FROM ledger_journalline WHERE period = %s",
        "UPDATE ledger_journalentry SET memo = 'edited' WHERE period = %s",
        "DELETE FROM ledger_journalentry WHERE period = %s",
        "UPDATE ledger_journalline SET period = '2026-11-01' WHERE period = %s",
    ],
)
def test_it_refuses_raw_sql_changes_to_a_closed_month(closed_sep: HourlyCost, sql: str) -> None:
    before = journal()
    with pytest.raises(DatabaseError, match="2026-09 is closed"):
        _raw(sql, [SEP])
    assert journal() == before


def test_it_refuses_raw_sql_inserts_into_a_closed_month(closed_sep: HourlyCost) -> None:
    line = JournalLine.objects.filter(period_id=SEP).first()
    assert line is not None
    with pytest.raises(DatabaseError, match="2026-09 is closed"):
        _raw(
            "INSERT INTO ledger_journalline (entry_id, period, day, account_id, cost_centre, currency, debit, credit, "
            "tokens, basis) VALUES (%s, %s, %s, %s, 'x', 'CNY', 1, 0, 0, '{}')",
            [line.entry_id, SEP, DAY1, line.account_id],
        )
    with pytest.raises(DatabaseError, match="2026-09 is closed"):
        _raw(
            "INSERT INTO ledger_journalentry (kind, period, day, adjusts, currency, memo, basis, created_at) "
            "VALUES ('adjustment', %s, %s, '2026-08-01', 'USD', '', '{}', now())",
            [SEP, DAY1],
        )


def test_it_refuses_a_line_in_another_period_than_its_entry(closed_sep: HourlyCost) -> None:
    Period.objects.create(month=OCT)
    line = JournalLine.objects.filter(period_id=SEP).first()
    assert line is not None
    with pytest.raises(DatabaseError):
        _raw(
            "INSERT INTO ledger_journalline (entry_id, period, day, account_id, cost_centre, currency, debit, credit, "
            "tokens, basis) VALUES (%s, %s, %s, %s, 'x', 'CNY', 1, 0, 0, '{}'); SET CONSTRAINTS ALL IMMEDIATE",
            [line.entry_id, OCT, DAY1, line.account_id],
        )


def test_it_refuses_to_truncate_the_journal_while_a_month_is_closed(closed_sep: HourlyCost) -> None:
    with pytest.raises(DatabaseError, match="cannot be truncated"):
        _raw("SET CONSTRAINTS ALL IMMEDIATE; TRUNCATE ledger_journalline")


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE ledger_period SET status = 'open' WHERE month = %s",
        "DELETE FROM ledger_period WHERE month = %s",
        "UPDATE ledger_period SET month = '2026-08-01' WHERE month = %s",
    ],
)
def test_it_refuses_to_open_or_remove_a_closed_month_without_a_reopen_event(closed_sep: HourlyCost, sql: str) -> None:
    with pytest.raises(DatabaseError, match="2026-09"):
        _raw(sql, [SEP])
    assert Period.objects.get(month=SEP).status == "closed"


def test_it_keeps_period_events_append_only(closed_sep: HourlyCost) -> None:
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("DELETE FROM ledger_periodevent")
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE ledger_periodevent SET note = 'x'")


# --- adjusting entries -------------------------------------------------------------------------


def test_it_adjusts_a_repriced_closed_day_in_the_next_open_month(closed_sep: HourlyCost) -> None:
    closed = journal()
    closed_sep.delete()
    factories.hourly_cost(hour=at(DAY1, 1), cost="12.50")

    month_accrue(month=SEP)

    assert journal()[: len(closed)] == closed
    adjustment = JournalEntry.objects.get(kind="adjustment")
    assert (adjustment.period_id, adjustment.adjusts, adjustment.day) == (OCT, SEP, DAY1)
    assert "Adjusts 2026-09" in adjustment.memo
    assert spend(period_id=OCT) == {("6401.01", "customer-service"): Decimal("2.50")}
    assert spend(day=DAY1) == {("6401.01", "customer-service"): Decimal("12.50")}
    assert JournalLine.objects.filter(entry=adjustment, account__kind="expense").get().basis["adjusts"] == "2026-09"
    assert balanced()


def test_it_adjusts_late_records_of_a_closed_day(closed_sep: HourlyCost) -> None:
    factories.hourly_cost(hour=at(DAY1, 7), cost="1.00", dims={"business_line": "search"})

    month_accrue(month=SEP)

    assert spend(period_id=OCT) == {("6401.01", "search"): Decimal("1.00")}


def test_it_adjusts_a_reclassified_closed_day_between_accounts(closed_sep: HourlyCost) -> None:
    HourlyCost.objects.filter(pk=closed_sep.pk).update(reason=Reason.objects.get(name="waste.duplicate"))
    HourlyCost.objects.filter(pk=closed_sep.pk).update(id=closed_sep.pk + 1000)  # as if rewritten

    month_accrue(month=SEP)

    assert spend(period_id=OCT) == {
        ("6401.01", "customer-service"): Decimal("-10.00"),
        ("6401.04", "customer-service"): Decimal("10.00"),
    }
    assert spend(day=DAY1) == {
        ("6401.01", "customer-service"): Decimal("0.00"),
        ("6401.04", "customer-service"): Decimal("10.00"),
    }
    assert balanced()


def test_it_replaces_its_adjustment_while_the_adjusting_month_is_open(closed_sep: HourlyCost) -> None:
    for cost in ("11.00", "13.00", "10.00"):
        HourlyCost.objects.all().delete()
        factories.hourly_cost(hour=at(DAY1, 1), cost=cost)
        month_accrue(month=SEP)

    assert not JournalEntry.objects.filter(kind="adjustment").exists()  # back to what was closed
    assert spend(day=DAY1) == {("6401.01", "customer-service"): Decimal("10.00")}


def test_it_adjusts_in_the_first_open_month_once_the_next_is_closed_too(closed_sep: HourlyCost) -> None:
    period_close(month=OCT, now=AFTER_OCT)
    factories.hourly_cost(hour=at(DAY1, 9), cost="1.00")

    month_accrue(month=SEP)

    assert JournalEntry.objects.get(kind="adjustment").period_id == NOV


def test_it_gives_the_same_adjustments_when_run_again(closed_sep: HourlyCost) -> None:
    factories.hourly_cost(hour=at(DAY1, 9), cost="1.00")
    month_accrue(month=SEP)
    first = journal()

    month_accrue(month=SEP, force=True)

    assert journal() == first


def test_it_keeps_a_closed_month_equal_to_its_priced_total_through_adjustments(closed_sep: HourlyCost) -> None:
    for day in range(5):
        factories.hourly_cost(hour=at(DAY1 + timedelta(days=day), 20), cost="0.004")

    month_accrue(month=SEP)

    total = next(t for t in month_totals(month=SEP) if t.currency == "CNY")
    assert total.booked == total.priced == Decimal("10.02")


# --- reopening ---------------------------------------------------------------------------------


def test_it_reopens_for_an_admin_with_a_recorded_reason(closed_sep: HourlyCost) -> None:
    admin = factories.finance_user("boss", role="admin")

    period_reopen(month=SEP, user=admin, reason="late invoice from the GPU vendor")

    assert Period.objects.get(month=SEP).status == "open"
    event = PeriodEvent.objects.filter(action="reopen").get()
    assert (event.user, event.note) == (admin, "late invoice from the GPU vendor")


def test_it_refuses_to_reopen_for_finance_or_without_a_reason(closed_sep: HourlyCost) -> None:
    with pytest.raises(PermissionDenied):
        period_reopen(month=SEP, user=factories.finance_user(), reason="please")
    with pytest.raises(PeriodError, match="say why"):
        period_reopen(month=SEP, user=factories.finance_user("root", role="admin"), reason=" ")
    assert Period.objects.get(month=SEP).status == "closed"


def test_it_rebooks_a_reopened_month_in_place_and_closes_it_again(closed_sep: HourlyCost) -> None:
    factories.hourly_cost(hour=at(DAY1, 9), cost="1.00")
    month_accrue(month=SEP)  # an adjustment in October
    period_reopen(month=SEP, user=factories.finance_user("root", role="admin"), reason="restate")
    factories.hourly_cost(hour=at(DAY1, 10), cost="1.00")

    period_close(month=SEP, now=AFTER_OCT)

    # October's open adjustment moved back into September's own accrual.
    assert not JournalEntry.objects.filter(kind="adjustment").exists()
    assert spend(period_id=SEP) == {("6401.01", "customer-service"): Decimal("12.00")}
    assert [e.action for e in PeriodEvent.objects.order_by("id")] == ["close", "reopen", "close"]


# --- a close racing a write ----------------------------------------------------------------------


@pytest.fixture
def seeded(transactional_db: None) -> None:
    """The data migrations' rows (reasons, rule set, chart), which an earlier transactional
    test's flush removed, written again."""
    import importlib

    from django.apps import apps

    from apps.classification.models import Reason
    from apps.ledger.models import Account, ConfigVersion

    if not Reason.objects.exists():
        importlib.import_module("migrations.classification.0002_builtin_reasons_and_ruleset").seed(apps, None)
    if not Account.objects.exists():
        ConfigVersion.objects.get_or_create(id=1)
        importlib.import_module("migrations.ledger.0003_seed_chart").seed(apps, None)


def test_it_makes_a_write_racing_a_close_wait_and_then_refuses_it(seeded: None) -> None:
    import threading

    from django.db import connections

    factories.hourly_cost(hour=at(DAY1, 1), cost="10.00")
    month_accrue(month=SEP)
    line = JournalLine.objects.filter(period_id=SEP, debit__gt=0).first()
    assert line is not None
    locked, go = threading.Event(), threading.Event()

    def close_slowly() -> None:  # a close that holds the period row a while before committing
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM ledger_period WHERE month = %s FOR UPDATE", [SEP])
                cursor.execute("UPDATE ledger_period SET status = 'closed' WHERE month = %s", [SEP])
                locked.set()
                go.wait(5)
        finally:
            connections.close_all()

    closer = threading.Thread(target=close_slowly)
    closer.start()
    assert locked.wait(5)
    threading.Timer(0.5, go.set).start()
    try:
        with pytest.raises(DatabaseError, match="2026-09 is closed"):
            _raw("UPDATE ledger_journalline SET debit = debit + 1 WHERE id = %s", [line.pk])  # waits, then sees it
    finally:
        closer.join(5)
        period_reopen(month=SEP, user=factories.finance_user("root", role="admin"), reason="test teardown")
    assert JournalLine.objects.get(pk=line.pk).debit == line.debit
