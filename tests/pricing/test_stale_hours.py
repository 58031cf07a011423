"""Pricing learns which hours to price again from the class rollup itself: the statement-level
trigger of migrations/pricing/0003 notes in pricing_dirtyhour every hour a statement on
classification_hourlyclass touched. Nothing upstream calls pricing: ingest stores, the class
rollup changes, and pricing's own job prices what its trigger noted."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from django.db.models import Sum

from apps.classification.models import HourlyClass
from apps.classification.services import reclassify_day
from apps.ingest import services as ingest
from apps.ingest.contract import RecordV1
from apps.ingest.models import HourlyUsage
from apps.pipeline.records import records_store
from apps.pricing.models import DirtyHour, HourlyCost
from apps.pricing.services import dirty_hours_price
from tests import factories
from tests.classification.helpers import ruleset_activated
from tests.pricing.helpers import DAY1, at

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _later(time_machine: Any) -> None:
    time_machine.move_to(DAY1 + timedelta(days=5), tick=False)


def marked() -> list[Any]:
    return sorted(DirtyHour.objects.values_list("hour", flat=True))


def typed(*hours: int, **overrides: Any) -> list[RecordV1]:
    return [
        msgspec.convert(factories.record(ts=(at(h) + timedelta(minutes=7)).isoformat(), **overrides), RecordV1)
        for h in hours
    ]


def test_ingest_alone_writes_no_class_rows_and_marks_no_hour() -> None:
    key = factories.collector_key(backfill=True)

    stored = ingest.records_store(source_id=key.key.pk, records=typed(3, 5))

    assert stored.accepted == 2
    assert HourlyUsage.objects.aggregate(n=Sum("records"))["n"] == 2
    assert not HourlyClass.objects.exists()
    assert marked() == []


def test_ingest_with_classification_marks_each_hour_it_classified_once() -> None:
    key = factories.collector_key(backfill=True)

    records_store(source_id=key.key.pk, records=typed(3, 5, 5))

    assert HourlyClass.objects.filter(hour=at(5)).exists()
    # One mark an hour, although the upsert fires the insert and the update triggers.
    assert marked() == [at(3), at(5)]
    records_store(source_id=key.key.pk, records=typed(5))  # adds to rows already there: an UPDATE
    assert marked() == [at(3), at(5)]


def test_every_statement_on_the_class_rollup_marks_the_hours_it_touched() -> None:
    factories.hourly_class(hour=at(1), tokens=10)
    factories.hourly_class(hour=at(2), tokens=20)
    assert marked() == [at(1), at(2)]
    DirtyHour.objects.all().delete()

    HourlyClass.objects.filter(hour=at(1)).update(tokens=11)
    assert marked() == [at(1)]
    HourlyClass.objects.filter(hour=at(2)).delete()
    assert marked() == [at(1), at(2)]
    HourlyClass.objects.filter(hour=at(9)).delete()  # touches nothing: marks nothing
    assert marked() == [at(1), at(2)]


def test_a_reclassified_day_is_priced_again_from_the_marks_of_its_trigger() -> None:
    factories.price_version(effective_from=DAY1, prices={"qwen2.5-*": ("2", "0.5", "6")})
    key = factories.collector_key(backfill=True)
    records_store(source_id=key.key.pk, records=typed(4, **{"dims.team": "b"}))
    dirty_hours_price()
    assert marked() == []
    before = HourlyCost.objects.aggregate(t=Sum("tokens"), c=Sum("cost"))
    ruleset = ruleset_activated(moves=[('dims.team == "b"', "completion", "waste.team_b")])

    reclassify_day(day=DAY1.date(), ruleset=ruleset)

    assert marked() == [at(4)]  # classification never called pricing: the trigger noted the hour
    dirty_hours_price()
    moved = HourlyCost.objects.filter(reason__name="waste.team_b").aggregate(t=Sum("tokens"), c=Sum("cost"))
    assert moved == {"t": 180, "c": Decimal("0.001080000000")}  # the completion's 180 tokens at 6 per million
    assert HourlyCost.objects.aggregate(t=Sum("tokens"), c=Sum("cost")) == before  # moved, not added
    assert marked() == []
