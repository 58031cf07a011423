"""The pure parts: pattern precedence and the pool allocation, exact to the smallest unit."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.pricing.book import PriceBook, VersionTerms, allocate, idle_split, largest_remainder, match_rank

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def test_it_ranks_exact_names_above_patterns_and_longer_patterns_above_shorter() -> None:
    assert match_rank("qwen2.5-7b", "qwen2.5-7b") == (1, 10)
    assert match_rank("qwen2.5-*", "qwen2.5-7b") == (0, 9)
    assert match_rank("qwen?.5-7b", "qwen2.5-7b") == (0, 10)
    assert match_rank("qwen2.5-*", "Qwen2.5-7b") is None  # case matters
    assert match_rank("qwen2.5-7b", "qwen2.5-7b-instruct") is None


def test_it_picks_the_best_pattern_per_kind() -> None:
    version = VersionTerms(
        1,
        T0,
        "CNY",
        (
            ("*", "input", Decimal("9")),
            ("qwen*", "input", Decimal("5")),
            ("qwen2.5-*", "input", Decimal("3")),
            ("qwen2.5-7b", "input", Decimal("2")),
            ("qwen*", "output", Decimal("8")),
        ),
    )
    assert version.prices_for("qwen2.5-7b") == {"input": Decimal("2"), "output": Decimal("8")}
    assert version.prices_for("qwen2.5-72b") == {"input": Decimal("3"), "output": Decimal("8")}
    assert version.prices_for("llama-3") == {"input": Decimal("9")}


def test_it_never_falls_back_to_an_older_version() -> None:
    old = VersionTerms(1, T0, "CNY", (("llama-3", "input", Decimal("1")),))
    new = VersionTerms(2, T0.replace(day=2), "CNY", (("qwen*", "input", Decimal("1")),))
    book = PriceBook([new, old], [])
    assert book.basis("llama-3", T0.replace(hour=23)) is not None
    assert book.basis("llama-3", T0.replace(day=2)) is None
    assert book.basis("llama-3", T0.replace(year=2024)) is None


def test_it_splits_a_pool_hour_to_the_cent_with_largest_remainders() -> None:
    split = allocate(pool_cost=Decimal("21.03"), weights=[Decimal(100)] * 3, capacity=1000, places=2)
    # 21.03 x 0.3 = 6.309 -> 6.31; 631 cents / 3 = 210.33: one row takes the cent left over.
    assert split.parts == [Decimal("2.11"), Decimal("2.10"), Decimal("2.10")]
    assert (split.allocated, split.idle, split.utilisation) == (Decimal("6.31"), Decimal("14.72"), Decimal("0.3"))
    assert sum(split.parts) + split.idle == Decimal("21.03")


def test_it_allocates_everything_above_full_capacity() -> None:
    split = allocate(pool_cost=Decimal("10.00"), weights=[Decimal(700), Decimal(800)], capacity=1000, places=2)
    assert split.parts == [Decimal("4.67"), Decimal("5.33")]
    assert split.idle == 0
    assert split.utilisation == Decimal("1.5")


def test_it_books_an_unused_hour_as_idle() -> None:
    split = allocate(pool_cost=Decimal("10.00"), weights=[], capacity=1000, places=2)
    assert (split.parts, split.allocated, split.idle) == ([], 0, Decimal("10.00"))


def test_it_refuses_a_pool_cost_below_the_smallest_unit() -> None:
    with pytest.raises(ValueError, match="whole number"):
        allocate(pool_cost=Decimal("1.005"), weights=[Decimal(1)], capacity=1, places=2)


weights = st.lists(
    st.builds(
        lambda tokens, weight: tokens * weight,
        st.integers(0, 10**9),
        st.decimals(min_value=0, max_value=10, places=6, allow_nan=False, allow_infinity=False),
    ),
    max_size=40,
)


@given(
    cents=st.integers(0, 10**11),
    weights=weights,
    capacity=st.integers(1, 10**12),
)
def test_it_always_adds_up_to_the_pool_cost_exactly(cents: int, weights: list[Decimal], capacity: int) -> None:
    pool_cost = Decimal(cents).scaleb(-2)
    split = allocate(pool_cost=pool_cost, weights=weights, capacity=capacity, places=2)
    assert sum(split.parts, Decimal(0)) + split.idle == pool_cost
    assert sum(split.parts, Decimal(0)) == split.allocated
    assert all(p >= 0 and p == p.quantize(Decimal("0.01")) for p in split.parts)
    assert split.idle >= 0
    used = sum(weights, Decimal(0))
    if used >= capacity:
        assert split.idle == 0
    if used:
        # Each part is within one cent of its exact share of the allocated amount.
        for part, weight in zip(split.parts, weights, strict=True):
            exact = Fraction(split.allocated) * Fraction(weight) / Fraction(used)
            assert abs(Fraction(part) - exact) < Fraction(1, 100)


@given(total=st.integers(0, 10**6), weights=st.lists(st.fractions(min_value=0, max_value=100), min_size=1, max_size=30))
def test_it_gives_largest_remainder_shares_that_sum_to_the_total(total: int, weights: list[Fraction]) -> None:
    if sum(weights) == 0:
        return
    shares = largest_remainder(total, weights)
    assert sum(shares) == total
    assert all(s >= 0 for s in shares)


# --- sharing an hour's idle cost out (the idle policies of apps/ledger/idle/) ------------------


def test_it_shares_idle_by_use_to_the_cent_with_the_remainder_to_the_largest_fraction() -> None:
    # 6.00 idle by 300 : 400 weighted tokens: 2.571428... and 3.428571...; floors 2.57 + 3.42 leave
    # one cent, which goes to the larger fraction (.857 > .143).
    parts, platform = idle_split(
        idle=Decimal("6.00"), weights={"search": Decimal(400), "customer-service": Decimal(300)}, places=2
    )
    assert parts == {"customer-service": Decimal("2.57"), "search": Decimal("3.43")}
    assert platform == 0


def test_it_leaves_an_hour_nobody_used_to_the_platform() -> None:
    assert idle_split(idle=Decimal("20.00"), weights={}, places=2) == ({}, Decimal("20.00"))
    assert idle_split(idle=Decimal("20.00"), weights={"search": Decimal(0)}, places=2) == ({}, Decimal("20.00"))


def test_it_shares_idle_by_reserved_share_leaving_the_unreserved_rest_to_the_platform() -> None:
    # 10.00 idle, 33.3 % and 50 % reserved: 3.33, 5.00, and 16.7 % = 1.67 stays the platform's.
    parts, platform = idle_split(
        idle=Decimal("10.00"),
        weights={"search": Decimal("33.3"), "customer-service": Decimal(50)},
        places=2,
        whole=Decimal(100),
    )
    assert parts == {"customer-service": Decimal("5.00"), "search": Decimal("3.33")}
    assert platform == Decimal("1.67")


def test_it_refuses_reserved_shares_over_the_whole() -> None:
    with pytest.raises(ValueError, match="more than the whole"):
        idle_split(idle=Decimal(1), weights={"a": Decimal(60), "b": Decimal(41)}, places=2, whole=Decimal(100))


@given(
    cents=st.integers(0, 10**9),
    weights=st.dictionaries(st.text(min_size=1, max_size=5), st.integers(0, 10**6), max_size=12),
    reserved=st.booleans(),
)
def test_it_always_shares_idle_out_exactly(cents: int, weights: dict[str, int], reserved: bool) -> None:
    idle = Decimal(cents).scaleb(-2)
    whole = Decimal(sum(weights.values()) + 1) if reserved else None
    parts, platform = idle_split(idle=idle, weights={k: Decimal(v) for k, v in weights.items()}, places=2, whole=whole)
    assert sum(parts.values(), Decimal(0)) + platform == idle
    assert all(p >= 0 and p == p.quantize(Decimal("0.01")) for p in [*parts.values(), platform])
    used = sum(weights.values())
    if used and not reserved:
        assert platform == 0
        for name, part in parts.items():  # within a cent of its exact share
            assert abs(Fraction(part) - Fraction(idle) * weights[name] / used) < Fraction(1, 100)
