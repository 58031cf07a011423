from __future__ import annotations

from django.db import migrations

# Most of what an ingest batch does to the class rollup is adding to rows of its hours that
# exist: room left in each page lets such an update stay on the page (a HOT update: the
# updated column, tokens, is in no index), so neither index gets a new entry. Pages written
# from now on keep it; the rollup is rewritten a day at a time by reclassification anyway.
TABLE = "classification_hourlyclass"


class Migration(migrations.Migration):
    dependencies = [("classification", "0007_reasoning_component")]

    operations = [
        migrations.RunSQL(f"ALTER TABLE {TABLE} SET (fillfactor = 70)", f"ALTER TABLE {TABLE} RESET (fillfactor)"),
    ]
