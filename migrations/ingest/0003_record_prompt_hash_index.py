from __future__ import annotations

from django.db import migrations

# Finds earlier ok records with the same prompt hash (the duplicate rule of classification).
# A hash index stores a 4-byte hash code per entry, a fraction of a btree on the bytes.
CREATE = """
CREATE INDEX ingest_record_prompt_hash ON ingest_record USING hash (prompt_hash)
WHERE status = 0 AND prompt_hash IS NOT NULL;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0002_record_partitioned_table")]

    operations = [migrations.RunSQL(CREATE, "DROP INDEX ingest_record_prompt_hash;")]
