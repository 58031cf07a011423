"""A model with neither a price nor a pool is flagged, never priced at 0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import Client

from apps.pricing.models import HourlyCost
from apps.pricing.selectors import unpriced_models
from apps.pricing.services import hours_price, price_set, price_version_create
from tests import factories
from tests.pricing.helpers import DAY1, at

pytestmark = pytest.mark.django_db
NOW = DAY1 + timedelta(days=2)


@pytest.fixture(autouse=True)
def _now(time_machine: Any) -> None:
    time_machine.move_to(NOW, tick=False)


@pytest.fixture
def priced_day() -> None:
    factories.price_version(effective_from=DAY1, prices={"qwen2.5-*": ("2", "0.5", "6")})
    factories.price_version(effective_from=at(12), prices={"qwen2.5-72b-*": ("4", "1", "12")})
    factories.cost_pool(model_patterns=["deepseek-r1-distill-*"], capacity=1000)
    factories.hourly_class(hour=at(1), tokens=500, model="qwen2.5-7b-instruct")
    factories.hourly_class(hour=at(13), tokens=700, model="qwen2.5-7b-instruct")  # not in the 12:00 version
    factories.hourly_class(hour=at(2), tokens=300, model="mystery-model")
    factories.hourly_class(hour=at(3), tokens=40, model="mystery-model", component="output", reason="effective.output")
    factories.hourly_class(hour=at(3), tokens=100, model="deepseek-r1-distill-qwen-7b")
    hours_price(start=DAY1, end=DAY1 + timedelta(days=1))


def test_it_reports_models_without_a_price_or_pool_and_writes_no_zero_cost(priced_day: None) -> None:
    found = unpriced_models(start=DAY1, end=DAY1 + timedelta(days=1))

    assert [(m.model, m.kinds, m.tokens, m.first_hour, m.last_hour) for m in found] == [
        ("mystery-model", ("input", "output"), 340, at(2), at(3)),
        ("qwen2.5-7b-instruct", ("input",), 700, at(13), at(13)),
    ]
    assert not HourlyCost.objects.filter(model__name="mystery-model").exists()
    assert list(HourlyCost.objects.filter(model__name="qwen2.5-7b-instruct").values_list("hour", flat=True)) == [at(1)]
    assert unpriced_models(start=at(4), end=at(12)) == []


def test_it_flags_a_missing_kind() -> None:
    price_version_create(effective_from=DAY1, prices={"llama-3": {"input": Decimal(1), "output": Decimal(2)}})
    factories.hourly_class(
        hour=at(1), tokens=10, model="llama-3", component="cached_prompt", reason="cache.prefix_cache"
    )
    factories.hourly_class(hour=at(1), tokens=10, model="llama-3")
    hours_price(start=at(1), end=at(2))

    [found] = unpriced_models(start=DAY1, end=NOW)
    assert (found.model, found.kinds, found.tokens) == ("llama-3", ("cached_input",), 10)


def test_a_cache_write_is_priced_as_input_and_flagged_as_cache_write_only_when_input_is_missing_too() -> None:
    price_version_create(effective_from=DAY1, prices={"claude": {"input": Decimal(3)}, "haiku": {"output": Decimal(5)}})
    for model in ("claude", "haiku"):
        factories.hourly_class(
            hour=at(1), tokens=10, model=model, component="cache_write", reason="effective.cache_write"
        )
    hours_price(start=at(1), end=at(2))

    [found] = unpriced_models(start=DAY1, end=NOW)
    assert (found.model, found.kinds, found.tokens) == ("haiku", ("cache_write",), 10)
    assert HourlyCost.objects.get(model__name="claude").cost == Decimal("0.00003")  # at the input price


def test_it_clears_the_flag_once_a_price_is_added_and_the_hours_repriced(priced_day: None) -> None:
    price_set(model_pattern="mystery-*", prices={"input": Decimal(1), "output": Decimal(1)}, effective_from=DAY1)
    assert len(unpriced_models(start=DAY1, end=NOW)) == 2  # until repriced

    hours_price(start=DAY1, end=DAY1 + timedelta(days=1))

    assert [m.model for m in unpriced_models(start=DAY1, end=NOW)] == ["qwen2.5-7b-instruct"]
    assert HourlyCost.objects.filter(model__name="mystery-model").count() == 2


def test_it_warns_in_the_system_check(priced_day: None) -> None:
    [warning] = [m for m in run_checks() if m.id == "pricing.W001"]
    assert "mystery-model (340 tokens: input/output)" in warning.msg
    assert "qwen2.5-7b-instruct@" not in warning.msg


def test_it_keeps_the_system_check_quiet_when_everything_is_priced() -> None:
    factories.price_version(effective_from=DAY1, prices={"*": ("1", "1", "1")})
    factories.hourly_class(hour=at(1), tokens=10, model="anything")
    hours_price(start=at(1), end=at(2))
    assert [m for m in run_checks() if m.id == "pricing.W001"] == []


def test_it_only_looks_back_30_days_in_the_system_check(priced_day: None, time_machine: Any) -> None:
    time_machine.move_to(datetime(2025, 4, 15, tzinfo=UTC), tick=False)
    assert [m for m in run_checks() if m.id == "pricing.W001"] == []


def test_it_shows_a_warning_on_the_price_book_pages(priced_day: None, client: Client, django_user_model: Any) -> None:
    admin = django_user_model.objects.create_superuser("admin", password="pw-for-tests-only")
    client.force_login(admin)
    for url in ("/admin/pricing/priceversion/", "/admin/pricing/costpool/"):
        page = client.get(url).content.decode()
        assert "neither a price nor a cost pool" in page and "mystery-model" in page
