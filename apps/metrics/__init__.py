"""GET /metrics for Prometheus: token, cost, ingest, rejection and alert-delivery series read
from the rollups (selectors.py, collector.py) plus the ingest process counters
(apps/ingest/metrics.py). Series, labels and the cardinality rule: docs/metrics.md."""
