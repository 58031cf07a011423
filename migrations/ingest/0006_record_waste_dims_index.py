from __future__ import annotations

from django.db import migrations

# The request list at the end of the waste drill-down finds the records of a dim set (and model)
# whose own fields decide the reason (an error, a timeout, an abort, a rejection, or a
# truncated answer) newest first. Those are a small part of the records, so the index holds only
# them: ingest maintains it for a tenth of the rows or less. finish_reason 2 is "length"
# (apps.ingest.contract.FINISH_REASONS, numbered from 1).
CREATE = """
CREATE INDEX ingest_record_waste_dims ON ingest_record (dims_id, ts) WHERE status <> 0 OR finish_reason = 2;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0005_droppedpartition")]

    operations = [migrations.RunSQL(CREATE, "DROP INDEX ingest_record_waste_dims;")]
