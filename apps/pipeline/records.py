"""Ingest with classification: what `POST /api/v1/records` does with a batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from apps.accounts.models import CollectorKey
from apps.classification.ingest import CLASSES
from apps.ingest import services
from apps.ingest.contract import RecordV1


def records_store(*, source_id: int, records: Sequence[RecordV1]) -> services.StoreResult:
    """Store validated records once and classify the new ones into the class rollup."""
    return services.records_store(source_id=source_id, records=records, companion=CLASSES)


def batch_ingest(
    *, key: CollectorKey, body: bytes, ndjson: bool, admit: Callable[[int], None] | None = None
) -> services.IngestResult:
    """Decode, validate, store and classify one request body (apps.ingest.services.batch_ingest)."""
    return services.batch_ingest(key=key, body=body, ndjson=ndjson, admit=admit, companion=CLASSES)
