"""ledger_days_mark_stale, the function of the triggers that mark ledger_dirtyday, as generated
from its declaration (apps.ledger.services.accrual.DIRTY_TRIGGER, an
apps.common.rollup.MarkTrigger) instead of written by hand: the same marks, written by the
statement every mark table's writers use. The triggers themselves are unchanged;
tests/common/test_mark_triggers.py checks the database holds what the declaration generates.
Frozen here: a change of the declaration comes with a migration of its own."""

from __future__ import annotations

from django.db import migrations

GENERATED = """
CREATE OR REPLACE FUNCTION ledger_days_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "ledger_dirtyday" ("day") SELECT h FROM (SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date FROM changed) AS c(h)
    WHERE NOT EXISTS (SELECT 1 FROM "ledger_dirtyday" d WHERE d."day" = h);
    RETURN NULL;
END
$$;
"""
# As migrations/ledger/0008_stale_days_trigger.py installed it.
PREVIOUS = """
CREATE OR REPLACE FUNCTION ledger_days_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_dirtyday (day)
    SELECT c.day FROM (SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date AS day FROM changed) c
    WHERE NOT EXISTS (SELECT 1 FROM ledger_dirtyday d WHERE d.day = c.day)
    ORDER BY 1;
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("ledger", "0018_verbose_names")]

    operations = [migrations.RunSQL(GENERATED, PREVIOUS)]
