"""reprice: day-sized chunks, resumable after a crash, the same result on a rerun."""

from __future__ import annotations

import io
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from apps.common import dayrun
from apps.common.models import JobRun
from apps.pricing import services, tasks
from apps.pricing.models import DirtyHour, HourlyCost, PoolIdleHour
from apps.pricing.services import hours_mark_dirty, price_set, reprice_run
from tests import factories
from tests.pricing.helpers import DAY1, at, costs

pytestmark = pytest.mark.django_db
QWEN = "qwen2.5-7b-instruct"
START, END = DAY1.date(), DAY1.date() + timedelta(days=3)


@pytest.fixture(autouse=True)
def _later(time_machine: Any) -> None:
    time_machine.move_to(DAY1 + timedelta(days=5), tick=False)


@pytest.fixture
def three_days() -> None:
    factories.price_version(effective_from=DAY1, prices={"llama-*": ("2", "0.5", "6")})
    factories.cost_pool(capacity=10_000)
    for day in range(3):
        for hour in (0, 9, 23):
            when = at(hour, DAY1 + timedelta(days=day))
            factories.hourly_class(hour=when, tokens=1000 + 7 * hour + day, model=QWEN, dims={"team": "a"})
            factories.hourly_class(hour=when, tokens=333, model=QWEN, dims={"team": "b"})
            factories.hourly_class(hour=when, tokens=123_457 * (day + 1), model="llama-3-8b")


def snapshot() -> tuple[list[Any], list[Any]]:
    idle = list(PoolIdleHour.objects.order_by("hour").values_list("hour", "pool_id", "allocated", "idle"))
    return costs(), idle


def test_it_resumes_after_a_crash_and_matches_a_clean_run(three_days: None, monkeypatch: pytest.MonkeyPatch) -> None:
    reprice_run(start=START, end=END)
    clean = snapshot()
    HourlyCost.objects.all().delete()
    PoolIdleHour.objects.all().delete()

    real = services.day_price
    calls: list[date] = []

    def crash_on_day_two(*, day: date, **kwargs: Any) -> Any:
        calls.append(day)
        if day == START + timedelta(days=1) and calls.count(day) == 1:
            raise RuntimeError("worker killed")
        return real(day=day, **kwargs)

    monkeypatch.setattr(services, "day_price", crash_on_day_two)
    with pytest.raises(RuntimeError):
        reprice_run(start=START, end=END)
    run = JobRun.objects.get(kind=services.RUN_KIND, status=JobRun.Status.FAILED)
    assert run.next_day == START + timedelta(days=1)
    assert {h.date() for h, *_ in costs()} == {START}  # day one committed, nothing of day two

    resumed = reprice_run(start=START, end=END)

    assert resumed.pk == run.pk and resumed.status == JobRun.Status.DONE
    assert calls == [START, START + timedelta(days=1), START + timedelta(days=1), START + timedelta(days=2)]
    assert snapshot() == clean


def test_it_gives_the_same_result_on_a_rerun_of_a_done_range(three_days: None) -> None:
    first = reprice_run(start=START, end=END)
    before = snapshot()
    second = reprice_run(start=START, end=END)
    assert second.pk != first.pk
    assert snapshot() == before
    assert len(before[0]) == 3 * 3 * 3 and len(before[1]) == 3 * 24


def test_it_records_the_new_price_and_version_after_a_price_change(three_days: None) -> None:
    reprice_run(start=START, end=END)
    old = {(r[0], r[1]): (r[4], r[6]) for r in costs() if r[1] == "llama-3-8b"}
    v2 = price_set(model_pattern="llama-*", prices={"input": Decimal(3)}, effective_from=at(12))

    reprice_run(start=START, end=END)

    new = {(r[0], r[1]): (r[4], r[6]) for r in costs() if r[1] == "llama-3-8b"}
    changed = {key for key in old if old[key] != new[key]}
    assert changed == {key for key in old if key[0] >= at(12)}
    assert all(new[key] == (old[key][0] * Decimal("1.5"), v2.pk) for key in changed)


def test_it_shows_progress_and_a_clear_error(three_days: None) -> None:
    out = io.StringIO()
    call_command("reprice", "--from", "2025-03-10", "--to", "2025-03-13", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["priced 2025-03-10 (1/3)", "priced 2025-03-11 (2/3)", "priced 2025-03-12 (3/3)"]
    assert "repriced 2025-03-10 .. 2025-03-13" in lines[3]
    with pytest.raises(CommandError, match="end must be after start"):
        call_command("reprice", "--from", "2025-03-10", "--to", "2025-03-10")


def test_it_reprices_from_the_celery_task(three_days: None) -> None:
    run_id = tasks.reprice_run.apply(args=["2025-03-10", "2025-03-13"]).get()
    assert JobRun.objects.get(pk=run_id).status == JobRun.Status.DONE
    assert HourlyCost.objects.count() == 27


def test_it_prices_dirty_hours_from_the_beat_task() -> None:
    factories.price_version(effective_from=DAY1, prices={"llama-*": ("2", "0.5", "6")})
    factories.hourly_class(hour=at(5), tokens=1_000_000, model="llama-3-8b")
    hours_mark_dirty(hours=[at(5).replace(minute=17), at(5)])
    assert DirtyHour.objects.count() == 1

    assert tasks.dirty_hours_price.apply().get() == 1

    assert [(r[0], r[4]) for r in costs()] == [(at(5), 2)]
    assert not DirtyHour.objects.exists()
    factories.hourly_class(hour=at(5), tokens=1_000_000, model="llama-3-8b", dims={"team": "x"})
    hours_mark_dirty(hours=[at(5)])
    tasks.dirty_hours_price.apply()
    assert [r[4] for r in costs()] == [2, 2]


def test_it_refuses_a_run_already_in_progress(three_days: None) -> None:
    run = dayrun.jobrun_open(kind=services.RUN_KIND, start=START, end=END)
    db = connection.settings_dict
    # Another process running it holds the run's session lock.
    with psycopg.connect(dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or 5432) as other:
        other.execute("SELECT pg_advisory_lock(%s::int, %s::int)", [dayrun._RUN_LOCK, run.pk])
        with pytest.raises(services.RepriceBusy):
            reprice_run(start=START, end=END)
