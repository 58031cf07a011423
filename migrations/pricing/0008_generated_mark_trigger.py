"""pricing_hours_mark_stale, the function of the triggers that mark pricing_dirtyhour, as generated
from its declaration (apps.pricing.services.DIRTY_TRIGGER, an apps.common.rollup.MarkTrigger)
instead of written by hand: the same marks, written by the statement every mark table's writers
use. The triggers themselves are unchanged; tests/common/test_mark_triggers.py checks the
database holds what the declaration generates. Frozen here: a change of the declaration comes
with a migration of its own."""

from __future__ import annotations

from django.db import migrations

GENERATED = """
CREATE OR REPLACE FUNCTION pricing_hours_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "pricing_dirtyhour" ("hour") SELECT h FROM (SELECT DISTINCT hour FROM changed) AS c(h)
    WHERE NOT EXISTS (SELECT 1 FROM "pricing_dirtyhour" d WHERE d."hour" = h);
    RETURN NULL;
END
$$;
"""
# As migrations/pricing/0003_stale_hours_trigger.py installed it.
PREVIOUS = """
CREATE OR REPLACE FUNCTION pricing_hours_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pricing_dirtyhour (hour)
    SELECT h.hour FROM (SELECT DISTINCT hour FROM changed) h
    WHERE NOT EXISTS (SELECT 1 FROM pricing_dirtyhour d WHERE d.hour = h.hour)
    ORDER BY 1;
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("pricing", "0007_cache_write_price")]

    operations = [migrations.RunSQL(GENERATED, PREVIOUS)]
