from __future__ import annotations

from django.db import migrations

# Ingest's duplicate lookup asks, per prompt hash of a batch, for the ok records with that hash in
# the window around the batch. A hash index finds every record with the hash, however old: a
# prompt sent all month long (a shared system prompt, a health check) was read in full for each
# batch. This btree holds (prompt_hash, ts), so the window is part of the index condition and a
# probe reads only the records in it. Built on the parent, it blocks writes to ingest_record while
# it builds: run the migration before starting the web processes.
FORWARD = """
DROP INDEX ingest_record_prompt_hash;
CREATE INDEX ingest_record_prompt_hash_ts ON ingest_record (prompt_hash, ts)
WHERE status = 0 AND prompt_hash IS NOT NULL;
"""

BACKWARD = """
DROP INDEX ingest_record_prompt_hash_ts;
CREATE INDEX ingest_record_prompt_hash ON ingest_record USING hash (prompt_hash)
WHERE status = 0 AND prompt_hash IS NOT NULL;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0006_record_waste_dims_index")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
