"""Price-book pricing of hourly rows: effective dates, precedence, currency, exact Decimals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from apps.pricing.models import HourlyCost, UnpricedHour
from apps.pricing.selectors import price_basis
from apps.pricing.services import PricingError, hours_price, price_set
from tests import factories
from tests.pricing.helpers import DAY1, at, costs

pytestmark = pytest.mark.django_db

M = 1_000_000
QWEN = "qwen2.5-7b-instruct"


def test_it_prices_the_hours_before_at_and_after_a_new_version_by_the_version_in_force() -> None:
    v1 = factories.price_version(effective_from=datetime(2025, 3, 1, tzinfo=UTC), prices={QWEN: ("2", "0.5", "6")})
    v2 = factories.price_version(effective_from=at(12), prices={QWEN: ("3", "0.5", "6")})
    for hour in (11, 12, 13):
        factories.hourly_class(hour=at(hour), tokens=M)

    hours_price(start=DAY1, end=DAY1 + timedelta(days=1))

    assert [(r[0].hour, r[4], r[6]) for r in costs()] == [(11, 2, v1.pk), (12, 3, v2.pk), (13, 3, v2.pk)]


def test_it_leaves_hours_before_the_first_version_unpriced() -> None:
    factories.price_version(effective_from=at(12), prices={QWEN: ("2", "0.5", "6")})
    factories.hourly_class(hour=at(11), tokens=M)
    factories.hourly_class(hour=at(12), tokens=M)

    hours_price(start=DAY1, end=DAY1 + timedelta(days=1))

    assert [r[0].hour for r in costs()] == [12]
    assert list(UnpricedHour.objects.values_list("hour", "kind", "tokens")) == [(at(11), "input", M)]


def test_it_prefers_an_exact_name_then_the_longest_pattern() -> None:
    factories.price_version(
        effective_from=DAY1,
        prices={"*": ("9", "9", "9"), "qwen2.5-*": ("3", "1", "6"), "qwen2.5-7b-instruct": ("2", "0.5", "5")},
    )
    factories.hourly_class(hour=at(1), tokens=M, model="qwen2.5-7b-instruct")
    factories.hourly_class(hour=at(1), tokens=M, model="qwen2.5-72b-instruct")
    factories.hourly_class(hour=at(1), tokens=M, model="llama-3-8b")

    hours_price(start=DAY1, end=DAY1 + timedelta(hours=2))

    assert {r[1]: r[4] for r in costs()} == {"qwen2.5-7b-instruct": 2, "qwen2.5-72b-instruct": 3, "llama-3-8b": 9}


def test_it_prices_each_component_by_its_kind() -> None:
    factories.price_version(effective_from=DAY1, prices={QWEN: ("2", "0.5", "6")})
    for component, reason in (
        ("cached_prompt", "cache.prefix_cache"),
        ("uncached_prompt", "effective.input"),
        ("structural", "effective.structural"),
        ("output", "effective.output"),
        ("padding", "waste.padding"),
        ("spec_rejected", "shadow.spec_rejected"),
        ("recomputed", "shadow.recompute"),
    ):
        factories.hourly_class(hour=at(1), tokens=M, component=component, reason=reason)

    hours_price(start=at(1), end=at(2))

    by_component = {r[2]: r[4] for r in costs()}
    # Shadow and padding tokens are priced as input; structural output as output.
    assert by_component == {
        "cached_prompt": Decimal("0.5"),
        "uncached_prompt": 2,
        "structural": 6,
        "output": 6,
        "padding": 2,
        "spec_rejected": 2,
        "recomputed": 2,
    }


def test_it_sums_rule_sets_and_keeps_costs_exact() -> None:
    from apps.classification.models import RuleSet

    factories.price_version(effective_from=DAY1, prices={QWEN: ("2.345678", "0.000001", "6")})
    factories.hourly_class(hour=at(1), tokens=123_456_789)
    factories.hourly_class(hour=at(1), tokens=1, component="cached_prompt", reason="cache.prefix_cache")
    # The same key under a retired rule set (a day half reclassified) adds up.
    retired = RuleSet.objects.create(version=99, status=RuleSet.Status.RETIRED)
    factories.hourly_class(hour=at(1), tokens=11, ruleset=retired)

    hours_price(start=at(1), end=at(2))

    rows = {r[2]: (r[3], r[4]) for r in costs()}
    assert rows["uncached_prompt"] == (123_456_800, Decimal("123456800") * Decimal("2.345678") / M)
    assert rows["uncached_prompt"][1] == Decimal("289.5898997104")
    assert rows["cached_prompt"] == (1, Decimal("0.000000000001"))
    assert HourlyCost.objects.get(component=0).cost.as_tuple().exponent == -12


def test_it_keeps_the_version_currency() -> None:
    version = factories.price_version(effective_from=DAY1, prices={QWEN: ("0.15", "0.075", "0.6")}, currency="USD")
    factories.hourly_class(hour=at(1), tokens=2 * M)

    hours_price(start=at(0), end=at(2))

    assert costs()[0][4:7] == (Decimal("0.3"), "USD", version.pk)


def test_it_tells_the_basis_of_a_record() -> None:
    v1 = factories.price_version(effective_from=DAY1, prices={"qwen*": ("2", "0.5", "6")})
    basis = price_basis(model_name=QWEN, at=at(5).replace(minute=42))
    assert basis is not None and basis.version == v1 and basis.pool is None
    assert basis.prices == {"input": 2, "cached_input": Decimal("0.5"), "output": 6}
    assert price_basis(model_name="llama-3", at=at(5)) is None
    assert price_basis(model_name=QWEN, at=at(0) - timedelta(seconds=1)) is None


def test_it_refuses_ranges_off_the_hour() -> None:
    with pytest.raises(PricingError):
        hours_price(start=at(1).replace(minute=30), end=at(2))
    with pytest.raises(PricingError):
        hours_price(start=at(2), end=at(1))


def test_it_makes_a_new_version_copying_the_one_in_force() -> None:
    v1 = factories.price_version(
        effective_from=DAY1, prices={QWEN: ("2", "0.5", "6"), "llama-*": ("1", "1", "1")}, name="list"
    )
    v2 = price_set(model_pattern=QWEN, prices={"input": Decimal("2.5")}, effective_from=at(6))
    again = price_set(model_pattern="llama-*", prices={"output": Decimal("2")}, effective_from=at(6))

    assert again == v2 and v2 != v1
    assert sorted(v2.prices.values_list("model_pattern", "kind", "per_million")) == [
        ("llama-*", "cached_input", 1),
        ("llama-*", "input", 1),
        ("llama-*", "output", 2),
        (QWEN, "cached_input", Decimal("0.5")),
        (QWEN, "input", Decimal("2.5")),
        (QWEN, "output", 6),
    ]
    with pytest.raises(PricingError, match="one currency"):
        price_set(model_pattern=QWEN, prices={"input": Decimal(1)}, effective_from=at(7), currency="USD")
