"""Self-hosted cost pools: hourly cost shared by compute-weighted tokens, idle remainder booked."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.pricing.models import HourlyCost, PoolIdleHour, UnpricedHour
from apps.pricing.services import dirty_hours_price, hours_price
from tests import factories
from tests.pricing.helpers import DAY1, at, costs

pytestmark = pytest.mark.django_db
QWEN = "qwen2.5-7b-instruct"
LATER = DAY1 + timedelta(days=2)


def idle(hour: datetime) -> tuple[Decimal, Decimal, Decimal, Decimal]:
    row = PoolIdleHour.objects.get(hour=hour)
    return row.pool_cost, row.allocated, row.idle, row.utilisation


@time_machine.travel(LATER, tick=False)
def test_it_allocates_a_pool_hour_exactly_to_the_cent_with_remainders() -> None:
    pool = factories.cost_pool(gpus=3, cost_per_gpu_hour=Decimal("7.01"), capacity=1000)
    for team in ("a", "b", "c"):
        factories.hourly_class(hour=at(1), tokens=100, model=QWEN, dims={"team": team})

    hours_price(start=at(1), end=at(2))

    # 21.03 x 300/1000 = 6.309 -> 6.31, shared 2.11 + 2.10 + 2.10; 14.72 idle.
    assert [(r[4], r[6], r[7]) for r in costs()] == [
        (Decimal("2.11"), None, pool.pk),
        (Decimal("2.10"), None, pool.pk),
        (Decimal("2.10"), None, pool.pk),
    ]
    assert idle(at(1)) == (Decimal("21.03"), Decimal("6.31"), Decimal("14.72"), Decimal("0.3"))
    assert HourlyCost.objects.aggregate(s=Sum("cost"))["s"] + PoolIdleHour.objects.get().idle == Decimal("21.03")


@time_machine.travel(LATER, tick=False)
def test_it_weights_tokens_by_component() -> None:
    factories.cost_pool(capacity=1000)  # 20.00 an hour; weights: uncached 1, cached 0.1, output 4
    factories.hourly_class(hour=at(1), tokens=1000, component="cached_prompt", reason="cache.prefix_cache")
    factories.hourly_class(hour=at(1), tokens=500, component="uncached_prompt")
    factories.hourly_class(hour=at(1), tokens=100, component="output", reason="effective.output")

    hours_price(start=at(1), end=at(2))

    assert {r[2]: r[4] for r in costs()} == {"cached_prompt": 2, "uncached_prompt": 10, "output": 8}
    assert idle(at(1)) == (20, 20, 0, 1)


@time_machine.travel(LATER, tick=False)
def test_it_allocates_all_of_an_hour_used_above_capacity() -> None:
    factories.cost_pool(capacity=1000)
    factories.hourly_class(hour=at(1), tokens=1500, dims={"team": "a"})
    factories.hourly_class(hour=at(1), tokens=1500, dims={"team": "b"})

    hours_price(start=at(1), end=at(2))

    assert [r[4] for r in costs()] == [10, 10]
    assert idle(at(1)) == (20, 20, 0, 3)


@time_machine.travel(LATER, tick=False)
def test_it_books_hours_without_tokens_as_idle() -> None:
    factories.cost_pool(cost_per_gpu_hour=Decimal("1.234567"), effective_from=at(3), effective_to=at(6))

    hours_price(start=DAY1, end=DAY1 + timedelta(days=1))

    # 2 x 1.234567 = 2.469134 an hour, rounded to the fen: 2.47.
    assert list(PoolIdleHour.objects.order_by("hour").values_list("hour", "pool_cost", "idle")) == [
        (at(h), Decimal("2.47"), Decimal("2.47")) for h in (3, 4, 5)
    ]


@time_machine.travel(LATER, tick=False)
def test_it_prices_a_pool_model_by_the_pool_and_the_others_by_the_book() -> None:
    version = factories.price_version(effective_from=DAY1, prices={"*": ("2", "0.5", "6")})
    pool = factories.cost_pool(capacity=1000, effective_to=at(2))
    factories.hourly_class(hour=at(1), tokens=1000, model=QWEN)
    factories.hourly_class(hour=at(1), tokens=1_000_000, model="gpt-4o-mini")
    factories.hourly_class(hour=at(2), tokens=1_000_000, model=QWEN)

    hours_price(start=at(1), end=at(3))

    assert {(r[0].hour, r[1]): (r[4], r[6], r[7]) for r in costs()} == {
        (1, QWEN): (20, None, pool.pk),
        (1, "gpt-4o-mini"): (2, version.pk, None),
        (2, QWEN): (2, version.pk, None),  # the pool's range ended
    }


def test_it_leaves_pool_rows_pending_until_the_hour_and_the_grace_period_end(time_machine: object) -> None:
    factories.price_version(effective_from=DAY1, prices={"llama-*": ("2", "0.5", "6")})
    pool = factories.cost_pool(capacity=1000, effective_from=DAY1)
    factories.hourly_class(hour=at(11), tokens=500, model=QWEN)
    factories.hourly_class(hour=at(11), tokens=1_000_000, model="llama-3-8b")

    time_machine.move_to(at(12).replace(minute=4), tick=False)  # type: ignore[attr-defined]
    result = hours_price(start=DAY1, end=DAY1 + timedelta(days=1))

    assert result.pending_pool_hours == 1
    assert [r[1] for r in costs()] == ["llama-3-8b"]
    assert not UnpricedHour.objects.exists()
    assert PoolIdleHour.objects.count() == 11  # hours 0..10

    time_machine.move_to(at(12).replace(minute=5), tick=False)  # type: ignore[attr-defined]
    dirty_hours_price()  # nothing marked dirty: the ended pool-hour is picked up by itself

    assert [(r[1], r[4], r[7]) for r in costs()] == [(QWEN, 10, pool.pk), ("llama-3-8b", 2, None)]
    assert idle(at(11)) == (20, 10, 10, Decimal("0.5"))
    assert PoolIdleHour.objects.count() == 12


row_strategy = st.tuples(
    st.integers(0, 2),  # team
    st.sampled_from(["cached_prompt", "uncached_prompt", "output", "padding", "recomputed"]),
    st.integers(1, 10**7),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(row_strategy, max_size=12, unique_by=lambda r: r[:2]),
    gpus=st.integers(1, 64),
    cost=st.decimals(min_value=0, max_value=1000, places=4, allow_nan=False, allow_infinity=False),
    capacity=st.integers(1, 10**8),
    weights=st.tuples(*[st.decimals(min_value=0, max_value=10, places=3) for _ in range(3)]),
)
@time_machine.travel(LATER, tick=False)
def test_it_adds_pool_parts_and_idle_up_to_the_pool_cost(
    rows: list[tuple[int, str, int]],
    gpus: int,
    cost: Decimal,
    capacity: int,
    weights: tuple[Decimal, Decimal, Decimal],
) -> None:
    with transaction.atomic():
        pool = factories.cost_pool(
            gpus=gpus,
            cost_per_gpu_hour=cost,
            capacity=capacity,
            w_uncached_prompt=weights[0],
            w_cached_prompt=weights[1],
            w_output=weights[2],
        )
        for team, component, tokens in rows:
            factories.hourly_class(hour=at(1), tokens=tokens, component=component, dims={"team": str(team)})

        hours_price(start=at(1), end=at(2))

        hour = PoolIdleHour.objects.get(pool=pool, hour=at(1))
        parts = list(HourlyCost.objects.values_list("cost", flat=True))
        assert hour.pool_cost == (gpus * cost).quantize(Decimal("0.01"))
        assert sum(parts, Decimal(0)) + hour.idle == hour.pool_cost
        assert sum(parts, Decimal(0)) == hour.allocated
        assert all(p >= 0 and p == p.quantize(Decimal("0.01")) for p in parts)
        assert len(parts) == len(rows)
        transaction.set_rollback(True)
