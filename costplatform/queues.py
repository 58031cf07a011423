"""Named Celery queues, one per stage, for workers that split the work (`make cluster`,
docs/scaling.md). Off by default: one worker consuming the default queue runs everything.
With COSTPLATFORM_TASK_QUEUES=true every task is sent to its stage's queue, beat's included, and
each worker names the queues it consumes (`celery worker -Q pipeline,ledger`); a queue nobody
consumes holds its tasks until a worker that does starts."""

from __future__ import annotations

# Glob on the task name -> queue. A task matching none goes to the default queue, "celery".
TASK_ROUTES = {
    "apps.ingest.tasks.*": {"queue": "pipeline"},
    "apps.classification.tasks.*": {"queue": "pipeline"},
    "apps.pricing.tasks.*": {"queue": "pipeline"},
    "apps.dashboards.tasks.*": {"queue": "pipeline"},
    "apps.ledger.tasks.*": {"queue": "ledger"},
    "apps.exports.tasks.*": {"queue": "ledger"},
    "apps.alerts.tasks.*": {"queue": "alerts"},
    "apps.audits.tasks.*": {"queue": "audits"},
}
QUEUES = ("pipeline", "ledger", "alerts", "audits", "celery")
