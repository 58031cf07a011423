from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0004_hourlyusage_no_fk_checks"),
    ]

    operations = [
        migrations.CreateModel(
            name="DroppedPartition",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("month", models.DateField(unique=True)),
                ("partition", models.CharField(max_length=63)),
                ("records", models.BigIntegerField()),
                ("dropped_at", models.DateTimeField(auto_now=True)),
            ],
            options={"ordering": ["month"]},
        ),
    ]
