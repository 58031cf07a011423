from __future__ import annotations

from django.db import migrations

# As classification 0008 for the class rollup: an ingest batch mostly adds to hourly usage
# rows that exist; room left in each page keeps those updates on the page (HOT: the updated
# counts are in no index), without new index entries. Pages written from now on keep it.
TABLE = "ingest_hourlyusage"


class Migration(migrations.Migration):
    dependencies = [("ingest", "0010_record_reasoning")]

    operations = [
        migrations.RunSQL(f"ALTER TABLE {TABLE} SET (fillfactor = 70)", f"ALTER TABLE {TABLE} RESET (fillfactor)"),
    ]
