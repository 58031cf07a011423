"""Daily accrual: priced rows to journal lines by mapping rules, idempotent, exact to the unit."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from apps.common.models import JobRun
from apps.currencies.rates import rate_set
from apps.ledger.models import AccrualDay, ElasticWindow, JournalEntry, JournalLine, MappingRule, MappingRuleRevision
from apps.ledger.services import accrual
from apps.ledger.services.accrual import month_accrue, range_accrue, recent_accrue
from apps.ledger.services.periods import month_totals
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price
from tests import factories
from tests.ledger.helpers import DAY1, SEP, account, at, balanced, journal, spend

pytestmark = [pytest.mark.django_db, pytest.mark.books_in("UTC")]
CS = {"business_line": "customer-service"}
SEARCH = {"business_line": "search"}
OCT, NOV = date(2026, 10, 1), date(2026, 11, 1)


def test_it_books_each_class_to_its_default_account_against_the_payable() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="10.00", reason="effective.input")
    factories.hourly_cost(hour=at(DAY1, 1), cost="2.00", reason="effective.structural", component="structural")
    factories.hourly_cost(hour=at(DAY1, 2), cost="1.50", reason="cache.prefix_cache", component="cached_prompt")
    factories.hourly_cost(hour=at(DAY1, 3), cost="3.00", reason="waste.timeout")
    factories.hourly_cost(hour=at(DAY1, 4), cost="0.25", reason="shadow.recompute", component="recomputed")

    month_accrue(month=SEP)

    assert spend() == {
        ("6401.01", "customer-service"): Decimal("11.50"),
        ("6401.02", "customer-service"): Decimal("2.00"),
        ("6401.04", "customer-service"): Decimal("3.00"),
        ("6401.05", "customer-service"): Decimal("0.25"),
    }
    payable = JournalLine.objects.get(account=account("2241"))
    assert (payable.credit, payable.debit, payable.cost_centre) == (Decimal("16.75"), 0, "customer-service")
    entry = JournalEntry.objects.get()
    assert (entry.kind, entry.period_id, entry.day, entry.currency) == ("accrual", SEP, DAY1, "CNY")
    assert balanced()


def test_it_books_a_line_per_day_cost_centre_account_and_model() -> None:
    for day in (DAY1, DAY1 + timedelta(days=1)):
        for dims in (CS, SEARCH):
            for model in ("qwen2.5-7b-instruct", "llama3-8b"):
                factories.hourly_cost(hour=at(day, 5), cost="1.00", model=model, dims=dims)
                factories.hourly_cost(hour=at(day, 6), cost="1.00", model=model, dims=dims)

    month_accrue(month=SEP)

    expense = JournalLine.objects.filter(account=account("6401.01"))
    assert expense.count() == 8
    assert {(ln.debit, ln.tokens) for ln in expense} == {(Decimal("2.00"), 2000)}
    assert JournalLine.objects.filter(account=account("2241")).count() == 8  # per day, cost centre and model
    assert JournalEntry.objects.count() == 2


def test_it_books_usage_without_a_business_line_to_unassigned() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00", dims={"team": "x"})

    month_accrue(month=SEP)

    assert spend() == {("6401.01", "unassigned"): Decimal("1.00")}


def test_it_books_usage_inside_an_elastic_window_to_elastic_whatever_its_class() -> None:
    ElasticWindow.objects.create(business_line="search", name="Double 11", start=at(DAY1, 8), end=at(DAY1, 10))
    for hour in (7, 8, 9, 10):
        factories.hourly_cost(hour=at(DAY1, hour), cost="1.00", dims=SEARCH)
        factories.hourly_cost(hour=at(DAY1, hour), cost="0.10", dims=SEARCH, reason="waste.truncated")
        factories.hourly_cost(hour=at(DAY1, hour), cost="5.00", dims=CS)  # another business line: not elastic

    month_accrue(month=SEP)

    assert spend() == {
        ("6401.01", "search"): Decimal("2.00"),
        ("6401.04", "search"): Decimal("0.20"),
        ("6401.03", "search"): Decimal("2.20"),
        ("6401.01", "customer-service"): Decimal("20.00"),
    }
    elastic = JournalLine.objects.get(account=account("6401.03"))
    assert elastic.basis["windows"] == [ElasticWindow.objects.get().pk]
    assert elastic.basis["reasons"] == {"effective.input": 2000, "waste.truncated": 2000}


def test_it_applies_the_first_matching_rule_by_priority_including_dims() -> None:
    MappingRule.objects.create(
        priority=5, name="RAG chunking is build cost", dims={"feature": "rag"}, account=account("6401.02")
    )
    factories.hourly_cost(hour=at(DAY1), cost="1.00", dims=CS | {"feature": "rag"})
    factories.hourly_cost(hour=at(DAY1), cost="2.00", dims=CS | {"feature": "faq"})

    month_accrue(month=SEP)

    assert spend() == {
        ("6401.02", "customer-service"): Decimal("1.00"),
        ("6401.01", "customer-service"): Decimal("2.00"),
    }


def test_it_books_rows_no_rule_matches_to_the_fallback_account() -> None:
    MappingRule.objects.filter(token_class="waste").update(active=False)
    factories.hourly_cost(hour=at(DAY1), cost="1.00", reason="waste.error")

    month_accrue(month=SEP)

    line = JournalLine.objects.get(account=account("6401.01"))
    assert line.basis["rules"] == ["fallback"]


def test_it_keeps_what_each_line_was_booked_from() -> None:
    row = factories.hourly_cost(hour=at(DAY1, 3), cost="0.000123456789", tokens=77, reason="waste.duplicate")

    month_accrue(month=SEP)

    line = JournalLine.objects.get(account=account("6401.04"))
    rule = MappingRule.objects.get(token_class="waste")
    assert line.basis == {
        "dims": {"business_line": "customer-service"},
        "exact": "0.000123456789",
        "reasons": {"waste.duplicate": 77},
        "price_versions": [row.price_version_id],
        "rules": [f"{rule.pk}@{rule.revision}"],
    }
    assert (line.day, line.model_id, line.currency, line.tokens) == (DAY1, row.model_id, "CNY", 77)


def test_it_keeps_the_dims_all_of_a_lines_rows_share() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="1", dims=CS | {"team": "bot", "feature": "faq"})
    factories.hourly_cost(hour=at(DAY1, 2), cost="1", dims=CS | {"team": "bot", "feature": "refund"})

    month_accrue(month=SEP)

    line = JournalLine.objects.get(account=account("6401.01"))
    assert line.basis["dims"] == {"business_line": "customer-service", "team": "bot"}


def test_it_keeps_every_revision_of_a_mapping_rule() -> None:
    rule = MappingRule.objects.get(token_class="waste")
    rule.account = account("6401.05")
    rule.save()
    rule.save()  # nothing changed: no new revision

    rule.refresh_from_db()
    assert rule.revision == 2
    snapshots = MappingRuleRevision.objects.filter(rule_id=rule.pk).order_by("revision")
    assert [(s.revision, s.snapshot["account_id"]) for s in snapshots] == [
        (1, account("6401.04").pk),
        (2, account("6401.05").pk),
    ]


@time_machine.travel(datetime(2025, 3, 12, tzinfo=UTC), tick=False)
def test_it_books_pool_idle_capacity_to_the_idle_account() -> None:
    pool = factories.cost_pool(capacity=1000)  # 20.00 an hour
    factories.dimset(CS)
    factories.hourly_class(hour=datetime(2025, 3, 10, 1, tzinfo=UTC), tokens=500, dims=CS)
    hours_price(start=datetime(2025, 3, 10, 1, tzinfo=UTC), end=datetime(2025, 3, 10, 3, tzinfo=UTC))

    month_accrue(month=datetime(2025, 3, 1).date())

    # Hour 1: 10.00 allocated, 10.00 idle; hour 2: all 20.00 idle.
    assert spend() == {("6401.01", "customer-service"): Decimal("10.00"), ("6401.06", "unassigned"): Decimal("30.00")}
    idle = JournalLine.objects.get(account=account("6401.06"))
    assert (idle.pool_id, idle.model_id, idle.basis["idle_hours"]) == (pool.pk, None, 2)
    assert balanced()


def test_it_gives_the_same_journal_when_run_again() -> None:
    for hour in range(24):
        factories.hourly_cost(hour=at(DAY1, hour), cost="0.333333333333", dims=CS)
        factories.hourly_cost(hour=at(DAY1, hour), cost="0.1", dims=SEARCH, reason="waste.error")
    month_accrue(month=SEP)
    first = journal()

    again = month_accrue(month=SEP)
    forced = month_accrue(month=SEP, force=True)

    assert journal() == first
    assert (again.days_computed, again.entries_written) == (0, 0)
    assert (forced.days_computed, forced.entries_written, forced.entries_removed) == (1, 0, 0)


def test_it_replaces_an_open_day_whose_costs_changed() -> None:
    row = factories.hourly_cost(hour=at(DAY1, 1), cost="1.00")
    month_accrue(month=SEP)
    HourlyCost.objects.filter(pk=row.pk).delete()  # pricing rewrites an hour: delete + insert
    factories.hourly_cost(hour=at(DAY1, 1), cost="1.25")

    result = month_accrue(month=SEP)

    assert (result.days_computed, result.entries_written, result.entries_removed) == (1, 1, 1)
    assert spend() == {("6401.01", "customer-service"): Decimal("1.25")}
    assert JournalEntry.objects.get().kind == "accrual"


def test_it_removes_a_day_whose_priced_rows_are_gone() -> None:
    row = factories.hourly_cost(hour=at(DAY1, 1), cost="1.00")
    month_accrue(month=SEP)
    row.delete()

    month_accrue(month=SEP)

    assert JournalEntry.objects.count() == 0


def test_it_rebooks_every_day_when_the_mapping_changes() -> None:
    factories.hourly_cost(hour=at(DAY1, 1), cost="1.00", reason="waste.error")
    month_accrue(month=SEP)
    MappingRule.objects.filter(token_class="waste").update(account=account("6401.05"))

    month_accrue(month=SEP)

    assert spend() == {("6401.05", "customer-service"): Decimal("1.00")}


def test_it_rounds_a_month_to_its_exact_priced_total_once() -> None:
    # 30 days of 0.004 (sub-cent each): day by day rounding would book 0.00; the carry books 0.12.
    for day in range(30):
        factories.hourly_cost(hour=at(SEP + timedelta(days=day), 12), cost="0.004")

    month_accrue(month=SEP)

    (total,) = month_totals(month=SEP)
    assert (total.booked, total.priced) == (Decimal("0.12"), Decimal("0.12"))
    amounts = list(
        JournalLine.objects.filter(account=account("6401.01")).order_by("day").values_list("debit", flat=True)
    )
    assert set(amounts) == {Decimal("0.00"), Decimal("0.01")} and sum(amounts) == Decimal("0.12")


def test_it_rerounds_later_days_when_an_earlier_day_changes() -> None:
    for day in range(3):
        factories.hourly_cost(hour=at(SEP + timedelta(days=day)), cost="0.004")
    month_accrue(month=SEP)
    factories.hourly_cost(hour=at(SEP, 5), cost="0.004")  # day 1 now 0.008

    month_accrue(month=SEP)

    (total,) = month_totals(month=SEP)
    assert total.booked == total.priced == Decimal("0.02")


def test_it_keeps_one_journal_in_the_functional_currency() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00", currency="CNY")
    factories.hourly_cost(hour=at(DAY1), cost="2.00", currency="USD", model="gpt-4o")
    rate_set(day=DAY1, currency="USD", rate="7.1", source="test")

    month_accrue(month=SEP)

    assert list(JournalEntry.objects.values_list("currency", flat=True)) == ["CNY"]
    assert {t.currency: t.booked for t in month_totals(month=SEP)} == {"CNY": Decimal("15.20")}
    assert balanced()


def test_it_accrues_whole_months_of_a_range_and_records_progress() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")
    factories.hourly_cost(hour=at(DAY1 + timedelta(days=30)), cost="1.00")  # October

    results = range_accrue(start=DAY1, end=DAY1 + timedelta(days=31))

    assert [r.month for r in results] == [SEP, SEP.replace(month=10)]
    assert AccrualDay.objects.filter(exact__CNY="1.000000000000").count() == 2
    run = JobRun.objects.get(kind=accrual.ACCRUE_KIND)
    assert (run.start, run.end, run.next_day, run.status) == (SEP, NOV, NOV, JobRun.Status.DONE)


def test_a_range_accrual_stopped_in_a_month_resumes_at_that_month(monkeypatch: pytest.MonkeyPatch) -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")
    factories.hourly_cost(hour=at(DAY1 + timedelta(days=30)), cost="2.00")  # October
    real, months = accrual.month_accrue, []

    def stop_in_october(*, month: date, force: bool = False) -> accrual.MonthResult:
        months.append(month)
        result = real(month=month, force=force)
        if month == OCT and months.count(OCT) == 1:
            raise RuntimeError("worker killed")  # after October's days were booked: they roll back
        return result

    monkeypatch.setattr(accrual, "month_accrue", stop_in_october)
    with pytest.raises(RuntimeError):
        range_accrue(start=DAY1, end=DAY1 + timedelta(days=31))
    failed = JobRun.objects.get(kind=accrual.ACCRUE_KIND)
    assert (failed.status, failed.next_day) == (JobRun.Status.FAILED, OCT)
    assert set(AccrualDay.objects.values_list("day__month", flat=True)) == {9}

    results = range_accrue(start=DAY1, end=DAY1 + timedelta(days=31))

    assert [r.month for r in results] == [OCT] and months == [SEP, OCT, OCT]
    assert JobRun.objects.get(pk=failed.pk).status == JobRun.Status.DONE
    assert set(AccrualDay.objects.values_list("day__month", flat=True)) == {9, 10}
    assert balanced()


def test_it_accrues_recent_and_dirty_days_in_the_beat_job() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")  # the ledger's trigger on the cost rollup marks its day

    with time_machine.travel(datetime(2026, 11, 20, tzinfo=UTC), tick=False):
        recent_accrue()

    assert spend() == {("6401.01", "customer-service"): Decimal("1.00")}
    assert not JournalEntry.objects.exclude(day=DAY1).exists()
    from apps.ledger.models import DirtyDay

    assert not DirtyDay.objects.exists()
