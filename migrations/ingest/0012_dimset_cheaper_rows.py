from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

# About one ingested record in ten brings a dim set never seen, and each new set paid for a
# deferred foreign-key check of its rollup reference, that reference's index and a LIKE index
# on the business line that no query uses. Sets are never deleted and ingest writes a set's
# rollup part before the set, so the reference keeps no constraint (as the rollups' references
# to sets do); the business line keeps a plain index.


class Migration(migrations.Migration):
    dependencies = [("ingest", "0011_hourlyusage_fillfactor")]

    operations = [
        migrations.AlterField(
            model_name="dimset",
            name="business_line",
            field=models.CharField(blank=True, default="", max_length=256),
        ),
        migrations.AlterField(
            model_name="dimset",
            name="rollup",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="ingest.dimset",
            ),
        ),
        migrations.AddIndex(
            model_name="dimset",
            index=models.Index(fields=["business_line"], name="ingest_dimset_business_line"),
        ),
    ]
