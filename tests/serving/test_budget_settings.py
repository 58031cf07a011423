"""The serving launcher's and server's hard-budget settings: what `python -m serving` hands
down, what the server reads, and a clear refusal of a bad value (no vLLM needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.__main__ import parser, vllm_command
from serving.config import ServingConfig

BASE = ["--model", "/models/m", "--costplatform-url", "http://platform", "--collector-key", "cpk_x"]


def test_the_launcher_hands_the_budget_options_down() -> None:
    args, rest = parser().parse_known_args([*BASE, "--budget-poll", "2.5", "--budget-fail", "closed"])

    _, env = vllm_command(args, rest)

    assert (env["COSTPLATFORM_BUDGET_POLL"], env["COSTPLATFORM_BUDGET_FAIL"]) == ("2.5", "closed")
    assert "COSTPLATFORM_BUDGET_STALE" not in env


def test_the_launcher_hands_the_reservation_options_down_and_reserves_vllms_context_by_default() -> None:
    reserve = ["--budget-poll", "1", "--budget-reserve", "redis://cache:6379/2", "--budget-hold", "4"]
    args, rest = parser().parse_known_args([*BASE, *reserve, "--max-model-len", "8192"])

    _, env = vllm_command(args, rest)

    assert (env["COSTPLATFORM_BUDGET_RESERVE"], env["COSTPLATFORM_BUDGET_HOLD"]) == ("redis://cache:6379/2", "4.0")
    assert env["COSTPLATFORM_BUDGET_MAX_TOKENS"] == "8192"  # no answer of vLLM's is longer
    assert "COSTPLATFORM_BUDGET_RESERVE_TTL" not in env
    args, rest = parser().parse_known_args([*BASE, *reserve, "--budget-max-tokens", "512", "--max-model-len", "8192"])
    assert vllm_command(args, rest)[1]["COSTPLATFORM_BUDGET_MAX_TOKENS"] == "512"


def test_the_launcher_refuses_an_unknown_fail_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_known_args([*BASE, "--budget-fail", "sometimes"])

    assert "--budget-fail" in capsys.readouterr().err


def test_the_server_reads_the_budget_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COSTPLATFORM_URL", "http://platform")
    monkeypatch.setenv("COSTPLATFORM_COLLECTOR_KEY", "cpk_x")
    monkeypatch.setenv("COSTPLATFORM_SPOOL", str(tmp_path))
    monkeypatch.setenv("COSTPLATFORM_BUDGET_POLL", "0.5")
    monkeypatch.setenv("COSTPLATFORM_BUDGET_FAIL", "closed")

    config = ServingConfig.from_env()

    assert config is not None and (config.budget_poll, config.budget_fail_closed) == (0.5, True)
    assert config.budget_reserve is None and config.budget_max_tokens == 4096 and config.budget_hold is None


def test_the_server_reads_the_reservation_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COSTPLATFORM_URL", "http://platform")
    monkeypatch.setenv("COSTPLATFORM_COLLECTOR_KEY", "cpk_x")
    monkeypatch.setenv("COSTPLATFORM_SPOOL", str(tmp_path))
    monkeypatch.setenv("COSTPLATFORM_BUDGET_RESERVE", "redis://cache:6379/2")
    monkeypatch.setenv("COSTPLATFORM_BUDGET_MAX_TOKENS", "8192")
    monkeypatch.setenv("COSTPLATFORM_BUDGET_HOLD", "4")
    monkeypatch.setenv("COSTPLATFORM_BUDGET_RESERVE_TTL", "900")

    config = ServingConfig.from_env()

    assert config is not None and config.budget_reserve == "redis://cache:6379/2"
    assert (config.budget_max_tokens, config.budget_hold, config.budget_ttl) == (8192, 4.0, 900.0)


@pytest.mark.parametrize(
    ("name", "value"), [("COSTPLATFORM_BUDGET_POLL", "often"), ("COSTPLATFORM_BUDGET_POLL", "-1"),
                        ("COSTPLATFORM_BUDGET_FAIL", "sometimes"), ("COSTPLATFORM_BUDGET_MAX_TOKENS", "many"),
                        ("COSTPLATFORM_BUDGET_HOLD", "-2")]
)  # fmt: skip
def test_the_server_refuses_a_bad_budget_setting_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str
) -> None:
    monkeypatch.setenv("COSTPLATFORM_URL", "http://platform")
    monkeypatch.setenv("COSTPLATFORM_COLLECTOR_KEY", "cpk_x")
    monkeypatch.setenv("COSTPLATFORM_SPOOL", str(tmp_path))
    monkeypatch.setenv(name, value)

    with pytest.raises(ValueError, match=name):
        ServingConfig.from_env()
