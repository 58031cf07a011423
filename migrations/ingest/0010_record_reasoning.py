from __future__ import annotations

from django.db import migrations, models

# tokens.reasoning (record v1): the part of completion spent reasoning. A constant default makes
# ADD COLUMN a catalogue change on the partitioned table and every partition (no rewrite), and
# keeps writers that do not name the column (older collectors' COPY lists, raw inserts) valid.
# Appended after the variable-length columns: 4 bytes a record, plus alignment.
ADD = "ALTER TABLE ingest_record ADD COLUMN reasoning integer NOT NULL DEFAULT 0;"
DROP = "ALTER TABLE ingest_record DROP COLUMN reasoning;"


class Migration(migrations.Migration):
    dependencies = [("ingest", "0009_partition_create_after_wait")]

    operations = [
        migrations.RunSQL(
            ADD,
            DROP,
            state_operations=[
                migrations.AddField(
                    model_name="record", name="reasoning", field=models.IntegerField(default=0, db_default=0)
                )
            ],
        ),
        migrations.AddField(
            model_name="hourlyusage", name="reasoning", field=models.BigIntegerField(default=0, db_default=0)
        ),
    ]
