"""Process counters of the ingest service, exported on /metrics (apps/metrics).

Under gunicorn each worker counts its own; with PROMETHEUS_MULTIPROC_DIR set (make run sets
it) prometheus-client keeps them in files there and /metrics sums the workers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# The platform's own process metrics, apart from the global registry: a library that
# registers there (a collector's shipper, say) must not show up in the platform's /metrics.
PROCESS_REGISTRY = CollectorRegistry()
RESULTS = ("accepted", "duplicate", "rejected")

INGEST_RECORDS = Counter(
    "costplatform_ingest_records",
    "Token records received by the ingest API since the process started, by result.",
    ["result"],
    registry=PROCESS_REGISTRY,
)
INGEST_BATCH_SECONDS = Histogram(
    "costplatform_ingest_batch_seconds",
    "Seconds to decode, validate, classify and store one ingest request body.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=PROCESS_REGISTRY,
)
for _result in RESULTS:
    INGEST_RECORDS.labels(_result)  # every series from the start, at 0


def ingest_counted(*, accepted: int, duplicates: int, rejected: int, seconds: float) -> None:
    INGEST_RECORDS.labels("accepted").inc(accepted)
    INGEST_RECORDS.labels("duplicate").inc(duplicates)
    INGEST_RECORDS.labels("rejected").inc(rejected)
    INGEST_BATCH_SECONDS.observe(seconds)
