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


@pytest.mark.parametrize(
    ("name", "value"), [("COSTPLATFORM_BUDGET_POLL", "often"), ("COSTPLATFORM_BUDGET_POLL", "-1"),
                        ("COSTPLATFORM_BUDGET_FAIL", "sometimes")]
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
