"""Retention: raw record partitions older than N months are detached and dropped whole; rollups,
prices and the ledger stay as they were; what needs the dropped records refuses clearly."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db.models import Count, Sum
from django.test import Client

from apps.audits.services import audit_run
from apps.classification.models import DirtyDay, HourlyClass
from apps.classification.services import ReclassifyError, dirty_days_reclassify, reclassify_run
from apps.ingest.models import DroppedPartition, HourlyUsage, Record, Rejection
from apps.ingest.partitions import partitions_existing
from apps.ingest.retention import RecordsGone, retention_horizon
from apps.ingest.tasks import retention_apply
from apps.ledger.models import JournalLine
from apps.ledger.selectors import trial_balance
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price, reprice_run
from costplatform.schedules import BEAT_SCHEDULE
from tests import factories
from tests.conftest import Collector

pytestmark = pytest.mark.django_db
JAN, JUN, FEB = date(2025, 1, 1), date(2025, 6, 1), date(2026, 2, 1)
TODAY = datetime(2026, 2, 20, 12, tzinfo=UTC)  # keeping 6 months: from 2025-08, so JAN and JUN go


def at(month: date, day: int = 10, hour: int = 9) -> datetime:
    return datetime(month.year, month.month, day, hour, tzinfo=UTC)


def month_end(month: date) -> datetime:
    return at(month, 1, 0) + timedelta(days=31 if month.month != 2 else 28)


def send(collector: Collector, month: date, count: int) -> None:
    """`count` records over two days of `month`, sent on the third (so ingest takes them)."""
    with time_machine.travel(at(month, 12), tick=False):
        records = [
            factories.record(ts=(at(month, 10 + i % 2, i % 24)).isoformat(), **{"tokens.prompt": 1000 + i})
            for i in range(count)
        ]
        assert collector.send(records).json()["accepted"] == count


@pytest.fixture
def history(seeded: None, collector: Collector, settings: Any) -> None:
    """Three months of records, priced and booked; JAN and JUN closed."""
    settings.RETENTION_MONTHS = 6
    factories.price_version(effective_from=datetime(2024, 1, 1, tzinfo=UTC), prices={"*": ("2", "0.5", "6")})
    for month, count in ((JAN, 30), (JUN, 20), (FEB, 10)):
        send(collector, month, count)
        hours_price(start=at(month, 10, 0), end=at(month, 12, 0))
        month_accrue(month=month)
    for month in (JAN, JUN):
        period_close(month=month, now=TODAY)


def rollups() -> dict[str, Any]:
    return {
        "usage": HourlyUsage.objects.aggregate(n=Count("id"), records=Sum("records"), prompt=Sum("prompt")),
        "classes": HourlyClass.objects.aggregate(n=Count("*"), tokens=Sum("tokens")),
        "costs": sorted(HourlyCost.objects.values_list("hour", "component", "cost")),
        "journal": sorted(JournalLine.objects.values_list("period", "account__code", "debit", "credit", "tokens")),
        "balances": [trial_balance(month=m) for m in (JAN, JUN, FEB)],
    }


def admin_client(django_user_model: Any) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-for-tests-only"))
    return client


def usage(client: Client, month: date) -> Any:
    query = {"from": at(month, 1, 0).isoformat(), "to": month_end(month).isoformat(), "group_by": "business_line"}
    response = client.get("/api/v1/usage", query)
    assert response.status_code == 200, response.content
    return response.json()


def test_the_horizon_keeps_this_month_and_the_n_before_it() -> None:
    assert retention_horizon(today=date(2026, 2, 20), months=6) == date(2025, 8, 1)
    assert retention_horizon(today=date(2026, 1, 31), months=13) == date(2024, 12, 1)
    assert retention_horizon(today=date(2026, 2, 20), months=0) is None


def test_it_drops_old_partitions_whole_and_keeps_rollups_prices_and_ledger(history: None, django_user_model) -> None:
    before = rollups()
    assert before["costs"] and before["journal"] and before["usage"]["records"] == 60
    client = admin_client(django_user_model)
    old_usage = [usage(client, m) for m in (JAN, JUN)]
    assert all(b["currencies"][0]["balanced"] for b in before["balances"])

    with time_machine.travel(TODAY, tick=False):
        result = retention_apply.apply().get()

    assert result["records"] == 50 and result["partitions"] >= 2  # and any empty older ones
    names = partitions_existing()
    assert "ingest_record_y2025m01" not in names and "ingest_record_y2025m06" not in names
    assert "ingest_record_y2026m02" in names
    assert Record.objects.count() == 10
    assert set(DroppedPartition.objects.filter(records__gt=0).values_list("month", "records")) == {(JAN, 30), (JUN, 20)}
    assert rollups() == before  # usage, classes, costs, journal lines and trial balances, to the unit
    assert [usage(client, m) for m in (JAN, JUN)] == old_usage
    with time_machine.travel(TODAY, tick=False):
        page = client.get("/api/v1/records", {"from": "2025-01-01", "to": "2026-03-01"}).json()
    assert {"2025-01", "2025-06"} <= set(page["dropped"]) and "2026-02" not in page["dropped"]
    assert len(page["results"]) == 10
    assert "ingest_record_y2025m01" in client.get("/admin/ingest/droppedpartition/").content.decode()


def test_dry_run_says_what_would_go_and_changes_nothing(history: None) -> None:
    out = io.StringIO()
    with time_machine.travel(TODAY, tick=False):
        call_command("retention", "--dry-run", stdout=out)

    text = out.getvalue()
    assert "keeping raw records from 2025-08 (6 months before this one)" in text
    assert "would drop ingest_record_y2025m01 (2025-01, 30 records)" in text
    assert "would drop ingest_record_y2025m06 (2025-06, 20 records)" in text
    assert Record.objects.count() == 60 and not DroppedPartition.objects.exists()


def test_the_command_drops_and_a_second_run_finds_nothing(history: None) -> None:
    with time_machine.travel(TODAY, tick=False):
        call_command("retention", stdout=io.StringIO())
        out = io.StringIO()
        call_command("retention", stdout=out)

    assert "dropped ingest_record" not in out.getvalue()
    assert "0 partitions, 0 records" in out.getvalue()
    assert Record.objects.count() == 10


def test_with_retention_off_nothing_is_dropped(history: None, settings: Any) -> None:
    settings.RETENTION_MONTHS = 0
    with time_machine.travel(TODAY, tick=False):
        retention_apply.apply().get()

    assert Record.objects.count() == 60


def test_what_needs_dropped_records_refuses_and_names_the_month(history: None) -> None:
    with time_machine.travel(TODAY, tick=False):
        retention_apply.apply().get()
    classes = HourlyClass.objects.filter(hour__lt=at(FEB, 1, 0)).aggregate(t=Sum("tokens"))

    with pytest.raises(ReclassifyError, match="raw records of 2025-01, which retention has dropped"):
        reclassify_run(start=JAN, end=JAN + timedelta(days=3))
    with pytest.raises(RecordsGone, match="audit of 2025-06 needs the raw records of 2025-06"):
        audit_run(month=JUN)
    DirtyDay.objects.create(day=date(2025, 1, 10))
    assert dirty_days_reclassify() == []  # nothing recomputed from no records: the day is let go
    assert not DirtyDay.objects.exists()
    assert HourlyClass.objects.filter(hour__lt=at(FEB, 1, 0)).aggregate(t=Sum("tokens")) == classes
    # Prices are applied to the class rollup, not to records: a dropped month can still be repriced.
    costs = sorted(HourlyCost.objects.filter(hour__lt=at(JUN, 1, 0)).values_list("hour", "cost"))
    reprice_run(start=JAN, end=date(2025, 2, 1))
    assert sorted(HourlyCost.objects.filter(hour__lt=at(JUN, 1, 0)).values_list("hour", "cost")) == costs


def test_reclassify_of_a_kept_month_still_works(history: None) -> None:
    with time_machine.travel(TODAY, tick=False):
        retention_apply.apply().get()
        run = reclassify_run(start=date(2026, 2, 10), end=date(2026, 2, 12))

    assert run.status == "done"


def test_ingest_refuses_records_before_the_horizon_so_a_dropped_month_is_not_made_again(
    history: None, collector: Collector
) -> None:
    with time_machine.travel(TODAY, tick=False):
        retention_apply.apply().get()
        result = collector.send([factories.record(ts=at(JUN, 15).isoformat()), factories.record()]).json()

    assert result["accepted"] == 1
    assert "ts" in result["rejected"][0]["errors"]
    assert "ingest_record_y2025m06" not in partitions_existing()


def test_old_rejections_are_deleted(collector: Collector, settings: Any) -> None:
    settings.REJECTIONS_RETENTION_DAYS = 30
    collector.send([factories.record(**{"tokens.prompt": -1})])
    Rejection.objects.update(received_at=datetime.now(UTC) - timedelta(days=31))
    collector.send([factories.record(**{"tokens.prompt": -1})])

    result = retention_apply.apply().get()

    assert result["rejections"] == 1 and Rejection.objects.count() == 1


def test_the_beat_runs_it_nightly() -> None:
    entry = BEAT_SCHEDULE["ingest-retention"]
    assert entry["task"] == "apps.ingest.tasks.retention_apply"
    assert entry["options"]["expires"] > 0
