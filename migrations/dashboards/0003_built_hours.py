from __future__ import annotations

import django.utils.timezone
from django.db import migrations, models

# Marks name the hour that changed, so the day in progress keeps its daily rows for the hours
# before the one being written (apps/dashboards/rollup.py). The lock is still per day.
MARK_STALE = """
CREATE OR REPLACE FUNCTION dashboards_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_day date;
BEGIN
    FOR changed_day IN SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date FROM changed ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock_shared(1684108147, changed_day - DATE '1970-01-01');
    END LOOP;
    INSERT INTO dashboards_staleday (day, hour)
    SELECT (h.hour AT TIME ZONE 'UTC')::date, h.hour FROM (SELECT DISTINCT hour FROM changed) h
    WHERE NOT EXISTS (SELECT 1 FROM dashboards_staleday s WHERE s.hour = h.hour);
    RETURN NULL;
END
$$;
"""
MARK_STALE_BY_DAY = """
CREATE OR REPLACE FUNCTION dashboards_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_day date;
BEGIN
    FOR changed_day IN SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date FROM changed ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock_shared(1684108147, changed_day - DATE '1970-01-01');
        INSERT INTO dashboards_staleday (day)
        SELECT changed_day WHERE NOT EXISTS (SELECT 1 FROM dashboards_staleday WHERE day = changed_day);
    END LOOP;
    RETURN NULL;
END
$$;
"""
# Every day in the hourly rollups is rebuilt once by the refresh job under the new scheme.
MARK_EXISTING = """
INSERT INTO dashboards_staleday (day, hour)
SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date, date_trunc('day', hour, 'UTC') FROM classification_hourlyclass
UNION SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date, date_trunc('day', hour, 'UTC') FROM pricing_hourlycost;
"""


class Migration(migrations.Migration):
    dependencies = [("dashboards", "0002_daily_line")]

    operations = [
        migrations.RunSQL("DELETE FROM dashboards_staleday", migrations.RunSQL.noop),
        migrations.AddField(
            model_name="staleday",
            name="hour",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now),
            preserve_default=False,
        ),
        migrations.CreateModel(
            name="BuiltDay",
            fields=[("day", models.DateField(primary_key=True, serialize=False)), ("through", models.DateTimeField())],
        ),
        migrations.RemoveIndex(model_name="dailyclass", name="dashboards_dailyclass_day"),
        migrations.RemoveIndex(model_name="dailycost", name="dashboards_dailycost_day"),
        migrations.AddIndex(model_name="dailyclass", index=models.Index(fields=["day"], name="dashboards_dailyclass_day")),
        migrations.AddIndex(
            model_name="dailyclass", index=models.Index(fields=["reason", "day"], name="dashboards_dailyclass_reason")
        ),
        migrations.AddIndex(model_name="dailycost", index=models.Index(fields=["day"], name="dashboards_dailycost_day")),
        migrations.AddIndex(
            model_name="dailycost", index=models.Index(fields=["reason", "day"], name="dashboards_dailycost_reason")
        ),
        migrations.RunSQL(MARK_STALE, MARK_STALE_BY_DAY),
        migrations.RunSQL(MARK_EXISTING, migrations.RunSQL.noop),
    ]
