"""dashboards_mark_stale, the function of the triggers that mark dashboards_staleday, as generated
from its declaration (apps.dashboards.rollup.STALE_TRIGGER, an apps.common.rollup.MarkTrigger)
instead of written by hand: the same marks, written by the statement every mark table's writers
use. The triggers themselves are unchanged; tests/common/test_mark_triggers.py checks the
database holds what the declaration generates. Frozen here: a change of the declaration comes
with a migration of its own."""

from __future__ import annotations

from django.db import migrations

GENERATED = """
CREATE OR REPLACE FUNCTION dashboards_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_day date;
BEGIN
    FOR changed_day IN SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date FROM changed ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock_shared(1684108147, changed_day - DATE '1970-01-01');
    END LOOP;
    INSERT INTO "dashboards_staleday" ("hour", "day") SELECT h, (h AT TIME ZONE 'UTC')::date FROM (SELECT DISTINCT hour FROM changed) AS c(h)
    WHERE NOT EXISTS (SELECT 1 FROM "dashboards_staleday" d WHERE d."hour" = h);
    RETURN NULL;
END
$$;
"""
# As migrations/dashboards/0003_built_hours.py installed it.
PREVIOUS = """
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


class Migration(migrations.Migration):
    dependencies = [("dashboards", "0008_cache_write_component")]

    operations = [migrations.RunSQL(GENERATED, PREVIOUS)]
