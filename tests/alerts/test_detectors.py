"""Each detector on synthetic series: it fires, it stays quiet, and it resolves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from apps.alerts.detectors import DETECTORS
from apps.alerts.detectors.money import BudgetInput, HealthInput
from apps.alerts.detectors.ops import CountInput, SeenInput
from apps.alerts.detectors.usage import ShareInput, SpikeInput
from apps.classification.health import SEEDS, Thresholds


def detect(name: str, series, **params):
    detector = DETECTORS[name]
    return detector.detect(series, {**detector.defaults, **params})


def test_it_fires_a_spike_when_the_hour_doubles_its_weekly_median():
    weeks = [50_000, 52_000, 48_000, 51_000]
    assert detect("spike", SpikeInput(110_000, weeks, 1.0)).firing
    assert not detect("spike", SpikeInput(80_000, weeks, 1.0)).firing  # 1.6x: quiet
    assert not detect("spike", SpikeInput(55_000, weeks, 1.0)).firing  # back to normal: resolves


def test_it_prorates_the_baseline_to_the_part_of_the_hour_gone():
    result = detect("spike", SpikeInput(30_000, [50_000] * 4, 0.25))
    assert result.firing and result.figures["baseline"] == 12_500 and result.figures["ratio"] == 2.4


def test_it_ignores_a_spike_inside_the_usual_spread_or_too_small():
    noisy = [10_000, 60_000, 20_000, 70_000]  # median 40k, a wide spread
    assert not detect("spike", SpikeInput(85_000, noisy, 1.0)).firing
    assert not detect("spike", SpikeInput(5_000, [100, 100, 100, 100], 1.0)).firing  # under min_tokens


def test_it_fires_a_spike_on_a_new_subject_with_no_history():
    assert detect("spike", SpikeInput(20_000, [0, 0, 0, 0], 1.0)).firing


def test_it_fires_a_trend_after_three_rising_days():
    rising = [Decimal("1.00"), Decimal("1.10"), Decimal("1.20"), Decimal("1.30")]
    assert detect("trend", rising).firing
    assert not detect("trend", [Decimal("1.00"), Decimal("1.10"), Decimal("1.05"), Decimal("1.30")]).firing
    assert not detect("trend", rising[1:]).firing  # three days are two rises
    assert not detect("trend", [*rising[1:], Decimal("1.25")]).firing  # a fall resolves
    # a steady mix wobbles by tenths of a percent a day: no trend (the demo's marketing line)
    wobble = [Decimal("0.001710"), Decimal("0.001711"), Decimal("0.001716"), Decimal("0.001741")]
    assert not detect("trend", wobble).firing and detect("trend", wobble, min_rise=0).firing


def test_it_fires_budget_levels_and_the_forecast():
    def level(spent: str, elapsed: float) -> str | None:
        result = detect("budget", BudgetInput(Decimal(spent), Decimal("1000"), elapsed, "CNY"))
        return result.level if result.firing else None

    assert level("500", 0.8) is None
    assert level("500", 0.4) == "forecast"  # 1,250 by month end
    assert level("500", 0.1) is None  # too early to forecast
    assert level("800", 0.9) == "80"
    assert level("1000.01", 0.9) == "100"
    assert detect("budget", BudgetInput(Decimal("1200"), Decimal("1000"), 0.9, "CNY")).critical


def health_input(effective: int, waste: int, shadow: int, cache: int, prompt: int, cached: int, **more) -> HealthInput:
    by_class = {"effective": effective, "waste": waste, "shadow": shadow, "cache": cache}
    return HealthInput(by_class, prompt, cached, more.pop("thresholds", SEEDS), more.pop("by_reason", {}))


def test_it_fires_health_breaches_at_the_seed_thresholds():
    # Of the 800,000 computed tokens (all but the 200,000 cached): effective 85 %, waste 10 %, shadow 5 %.
    healthy = health_input(680_000, 80_000, 40_000, 200_000, prompt=300_000, cached=200_000)
    assert not detect("health", healthy).firing
    # Computed 900,000: effective 64.4 %, waste 22.2 %, shadow 13.3 %; cache hit 100,000 / 600,000.
    wasteful = health_input(580_000, 200_000, 120_000, 100_000, prompt=600_000, cached=100_000)
    result = detect("health", wasteful)
    assert result.firing and result.figures["breaches"] == ["effective", "waste", "cache_hit", "shadow"]
    assert result.figures["effective"] == "64.4%" and result.figures["waste"] == "22.2%"
    assert not detect("health", health_input(100, 900, 0, 0, 1_000, 0)).firing  # too few tokens


def test_a_line_that_caches_well_and_computes_well_is_healthy():
    # 65 % of the prompt from the cache, 96 % of what was computed effective: cached tokens are
    # neither effective nor waste, so all four ratios are in range (by all tokens, effective
    # would be far under 75 %).
    prompt, cached = 1_000_000, 650_000
    computed = 600_000  # 350,000 uncached prompt + 250,000 completion
    found = health_input(576_000, 18_000, 6_000, cached, prompt=prompt, cached=cached)
    result = detect("health", found)
    assert 576_000 / (computed + cached) < 0.75
    assert not result.firing, result.figures
    assert (result.figures["effective"], result.figures["cache_hit"]) == ("96.0%", "65.0%")


def test_it_judges_a_line_by_its_own_thresholds():
    # A batch line that settled at 72 % effective (its latency SLA) has its own row.
    found = health_input(730, 200, 70, 0, prompt=1_000, cached=700)
    assert detect("health", found, min_tokens=0).figures["breaches"] == ["effective", "waste"]
    own = Thresholds(effective_min=Decimal("0.70"), waste_max=Decimal("0.25"))
    assert not detect("health", health_input(730, 200, 70, 0, 1_000, 700, thresholds=own), min_tokens=0).firing


def test_it_names_the_top_reasons_of_the_waste_and_shadow_out_of_range():
    reasons = {"waste.timeout": 300, "waste.duplicate": 100, "shadow.spec_rejected": 50, "effective.output": 550}
    found = health_input(550, 400, 50, 0, prompt=1_000, cached=800, by_reason=reasons)
    result = detect("health", found, min_tokens=0)
    assert result.figures["breaches"] == ["effective", "waste"]
    waste = {
        "class": "waste",
        "share": 0.4,
        "top": [{"reason": "timeout", "share": 0.75}, {"reason": "duplicate", "share": 0.25}],
    }
    shadow = {"class": "shadow", "share": 0.05, "top": [{"reason": "spec_rejected", "share": 1.0}]}
    assert result.figures["reasons"] == [waste, shadow]  # effective is low: both named, in range or not
    only_waste = health_input(850, 150, 0, 0, prompt=1_000, cached=800, by_reason={"waste.timeout": 150})
    assert detect("health", only_waste, min_tokens=0).figures.get("reasons") is None  # all in range


def test_it_fires_when_the_unattributed_share_grows():
    assert detect("unattributed", ShareInput(0.12, [0.04, 0.05, 0.05, 0.06])).firing
    assert not detect("unattributed", ShareInput(0.06, [0.04, 0.05, 0.05, 0.06])).firing
    assert not detect("unattributed", ShareInput(0.03, [0.0, 0.0])).firing  # under min_share


def test_it_fires_when_dead_letters_grow():
    assert detect("dead_letters", CountInput(40, [2, 3, 1, 4])).firing
    assert not detect("dead_letters", CountInput(5, [0, 0, 0])).firing  # under min_count
    assert not detect("dead_letters", CountInput(12, [5, 6, 4])).firing  # under 3x


def test_it_fires_when_a_collector_goes_silent():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert detect("collector_silent", SeenInput(now - timedelta(minutes=45), now)).firing
    assert not detect("collector_silent", SeenInput(now - timedelta(minutes=2), now)).firing


def test_it_turns_a_ledger_finding_into_an_event():
    result = detect("ledger_finding", {"id": 7, "message": "effective share 62 %", "period": "2026-10"})
    assert result.firing and DETECTORS["ledger_finding"].events
