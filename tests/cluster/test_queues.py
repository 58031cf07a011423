"""Every task of the apps has a named queue (costplatform/queues.py), beat's entries included."""

from __future__ import annotations

from fnmatch import fnmatch

from costplatform.celery import app
from costplatform.queues import QUEUES, TASK_ROUTES
from costplatform.schedules import BEAT_SCHEDULE


def _queue(task: str) -> str:
    return next((route["queue"] for glob, route in TASK_ROUTES.items() if fnmatch(task, glob)), "celery")


def test_every_app_task_and_beat_entry_goes_to_a_named_queue() -> None:
    app.loader.import_default_modules()
    tasks = {name for name in app.tasks if name.startswith("apps.")}
    tasks |= {entry["task"] for entry in BEAT_SCHEDULE.values()}
    assert tasks, "no tasks found"
    unrouted = sorted(task for task in tasks if _queue(task) == "celery")
    assert unrouted == []
    assert {_queue(task) for task in tasks} <= set(QUEUES)
    assert _queue("apps.alerts.tasks.notification_send") == "alerts"
    assert _queue("apps.ledger.tasks.period_close") == "ledger"
