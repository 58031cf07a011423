from __future__ import annotations

from django.db import migrations, models

# tokens.prompt_cache_write (record v1): the part of the prompt written into a provider's prompt
# cache. As reasoning's (0010): a constant default makes ADD COLUMN a catalogue change on the
# partitioned table and every partition (no rewrite), and keeps writers that do not name the column
# (older COPY lists, raw inserts) valid.
ADD = "ALTER TABLE ingest_record ADD COLUMN prompt_cache_write integer NOT NULL DEFAULT 0;"
DROP = "ALTER TABLE ingest_record DROP COLUMN prompt_cache_write;"


class Migration(migrations.Migration):
    dependencies = [("ingest", "0015_verbose_names")]

    operations = [
        migrations.RunSQL(
            ADD,
            DROP,
            state_operations=[
                migrations.AddField(
                    model_name="record", name="prompt_cache_write", field=models.IntegerField(default=0, db_default=0)
                )
            ],
        ),
        migrations.AddField(
            model_name="hourlyusage", name="prompt_cache_write", field=models.BigIntegerField(default=0, db_default=0)
        ),
    ]
