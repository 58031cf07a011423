"""The cluster suite's table, printed at the end of the run (as the fault suite's)."""

from __future__ import annotations

from typing import Any

TABLE: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TABLE:
        terminalreporter.section("cluster faults")
        for line in TABLE:
            terminalreporter.write_line(line)
