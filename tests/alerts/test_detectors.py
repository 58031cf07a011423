"""Each detector on synthetic series: it fires, it stays quiet, and it resolves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from apps.alerts.detectors import DETECTORS
from apps.alerts.detectors.money import BudgetInput, HealthInput
from apps.alerts.detectors.ops import CountInput, SeenInput
from apps.alerts.detectors.usage import ShareInput, SpikeInput


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


def test_it_fires_health_breaches_at_the_seed_thresholds():
    healthy = HealthInput(
        total=1_000_000, effective=800_000, waste=100_000, shadow=50_000, prompt=600_000, prompt_cached=400_000
    )
    assert not detect("health", healthy).firing
    wasteful = HealthInput(1_000_000, 700_000, 200_000, 90_000, 600_000, 300_000)
    result = detect("health", wasteful)
    assert result.firing and result.figures["breaches"] == ["effective", "waste", "cache_hit", "shadow"]
    assert not detect("health", HealthInput(1_000, 100, 900, 0, 1_000, 0)).firing  # too few tokens


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
