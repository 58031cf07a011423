"""Every beat entry names a task the workers have, called with arguments its signature takes: a
task renamed or moved without its entry would otherwise stop running, with no error anywhere
but a worker's log once a period."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from costplatform.celery import app
from costplatform.schedules import BEAT_SCHEDULE


def problem_of(entry: dict[str, Any]) -> str:
    """What is wrong with a beat entry ("" when nothing)."""
    app.loader.import_default_modules()
    task = app.tasks.get(entry["task"])
    if task is None:
        return f"no task named {entry['task']}"
    try:
        inspect.signature(task.run).bind(*entry.get("args", ()), **entry.get("kwargs", {}))
    except TypeError as exc:
        return f"{entry['task']} does not take {entry.get('args', ())} {entry.get('kwargs', {})}: {exc}"
    return ""


@pytest.mark.parametrize("name", sorted(BEAT_SCHEDULE))
def test_a_beat_entry_names_a_real_task_and_fits_its_signature(name: str) -> None:
    assert problem_of(BEAT_SCHEDULE[name]) == "", name


def test_a_moved_task_or_a_wrong_argument_is_caught() -> None:
    any_entry = next(iter(BEAT_SCHEDULE.values()))
    assert "no task named" in problem_of({**any_entry, "task": "apps.ledger.tasks.period_close_moved"})
    assert "does not take" in problem_of({**any_entry, "kwargs": {"no_such_argument": 1}})
