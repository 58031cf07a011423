import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    """What each collector key may write: its business lines, reconciliation records, how far back.
    Existing keys get the safe defaults too (3 days, no reconciliation, no backfill): a key
    that runs the vLLM /metrics reconciler or loads history needs an admin to allow it."""

    dependencies = [("accounts", "0005_ratebucket_unlogged")]

    operations = [
        migrations.AddField(
            model_name="collectorkey",
            name="business_lines",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=256),
                blank=True,
                default=list,
                help_text="Business lines this key may write (its records' business_line dim); empty = all.",
                size=None,
            ),
        ),
        migrations.AddField(
            model_name="collectorkey",
            name="reconciliation",
            field=models.BooleanField(
                default=False,
                help_text="May send reconciliation records (dim costplatform.kind), as the vLLM /metrics "
                "reconciler does.",
            ),
        ),
        migrations.AddField(
            model_name="collectorkey",
            name="backdate_days",
            field=models.PositiveIntegerField(
                default=3,
                help_text="Records older than this many days are refused, unless the key is marked for backfill.",
            ),
        ),
        migrations.AddField(
            model_name="collectorkey",
            name="backfill",
            field=models.BooleanField(
                default=False,
                help_text="Accept records of any age the platform keeps (COSTPLATFORM_INGEST_MAX_AGE_DAYS), "
                "to load history; unmark when done.",
            ),
        ),
    ]
