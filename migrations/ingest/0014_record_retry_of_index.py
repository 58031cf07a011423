from __future__ import annotations

from django.db import migrations

# A record's page shows its retry chain: the attempts that retry it are found by their retry_of
# within a day of it (apps.dashboards.selectors.retry_chain). Without an index that read went
# through every record of the two days around it (31,000 pages at 10 million records a month),
# even when nothing retries it, as most records. Retries are a small part of the records, so
# the index holds only them.
CREATE = """
CREATE INDEX ingest_record_retry_of ON ingest_record (retry_of, ts) WHERE retry_of IS NOT NULL;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0013_dimset_dims_path_gin")]

    operations = [migrations.RunSQL(CREATE, "DROP INDEX ingest_record_retry_of;")]
