from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("classification", "0005_hourlyclass_no_fk_checks"),
        ("dashboards", "0003_built_hours"),
        ("ingest", "0004_hourlyusage_no_fk_checks"),
    ]

    operations = [
        migrations.CreateModel(
            name="HourlyLineClass",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("hour", models.DateTimeField()),
                ("business_line", models.CharField(blank=True, default="", max_length=256)),
                (
                    "component",
                    models.SmallIntegerField(
                        choices=[
                            (0, "cached_prompt"),
                            (1, "uncached_prompt"),
                            (2, "structural"),
                            (3, "output"),
                            (4, "padding"),
                            (5, "spec_rejected"),
                            (6, "recomputed"),
                        ]
                    ),
                ),
                ("tokens", models.BigIntegerField()),
                (
                    "model",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="ingest.servedmodel",
                    ),
                ),
                (
                    "reason",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="classification.reason",
                    ),
                ),
            ],
            options={"indexes": [models.Index(fields=["hour"], name="dashboards_hourlyline_hour")]},
        ),
        # Days built before this table existed are rebuilt by the refresh job.
        migrations.RunSQL(
            "INSERT INTO dashboards_staleday (day, hour) SELECT day, day::timestamp AT TIME ZONE 'UTC' "
            "FROM dashboards_builtday",
            migrations.RunSQL.noop,
        ),
    ]
