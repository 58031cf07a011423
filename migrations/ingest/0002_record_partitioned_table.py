from __future__ import annotations

from django.db import migrations

# ingest_record is range-partitioned by month on ts; partitions are created by
# apps.ingest.partitions (ahead of need by a beat job, and on demand by ingest).
# Columns are ordered 8-byte, 4-byte, 2-byte, variable so rows pack without padding.
# The primary key leads with ts, so it also serves time-range scans and keyset pages.
CREATE = """
CREATE TABLE ingest_record (
    ts              timestamptz NOT NULL,
    record_key      bigint      NOT NULL,
    source_id       integer     NOT NULL,
    model_id        integer     NOT NULL,
    dims_id         integer     NOT NULL,
    prompt          integer     NOT NULL,
    prompt_cached   integer     NOT NULL,
    completion      integer     NOT NULL,
    system          integer     NOT NULL,
    tool            integer     NOT NULL,
    structural      integer     NOT NULL,
    padding         integer     NOT NULL,
    draft           integer     NOT NULL,
    draft_accepted  integer     NOT NULL,
    recomputed      integer     NOT NULL,
    queued          integer,
    ttft            integer,
    prefill         integer,
    decode          integer,
    e2e             integer,
    endpoint        smallint,
    status          smallint    NOT NULL,
    finish_reason   smallint,
    quality_tier    smallint,
    attempt         smallint    NOT NULL,
    record_id       text        NOT NULL,
    retry_of        text,
    prompt_hash     bytea,
    CONSTRAINT ingest_record_pkey PRIMARY KEY (ts, source_id, record_key)
) PARTITION BY RANGE (ts);
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0001_initial")]

    operations = [migrations.RunSQL(CREATE, "DROP TABLE ingest_record CASCADE;")]
