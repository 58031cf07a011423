"""The ledger learns which days to book again from pricing's rollups themselves: every
statement that changes pricing_hourlycost or pricing_poolidlehour (a priced or repriced day's
delete and insert) notes the UTC dates of the hours it touched in ledger_dirtyday, committed
with the change. Before, pricing called the ledger to mark them (as local days). A UTC date is
within a day of the local one, and recent_accrue looks at the months of the day before and after
a marked day, so the same months are booked. Statement-level with transition tables; the marks
have no unique key, so concurrent writers never wait on each other's marks.

Numbered 0008 and depending on 0006: a 0007 is being added beside it."""

from django.db import migrations

MARK_STALE = """
CREATE FUNCTION ledger_days_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_dirtyday (day)
    SELECT c.day FROM (SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date AS day FROM changed) c
    WHERE NOT EXISTS (SELECT 1 FROM ledger_dirtyday d WHERE d.day = c.day)
    ORDER BY 1;
    RETURN NULL;
END
$$;
"""
TABLES = ("pricing_hourlycost", "pricing_poolidlehour")
EVENTS = ("INSERT", "UPDATE", "DELETE")
TRIGGERS = "".join(
    f"CREATE TRIGGER ledger_stale_{event.lower()} AFTER {event} ON {table} "
    f"REFERENCING {'OLD' if event == 'DELETE' else 'NEW'} TABLE AS changed "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_days_mark_stale();\n"
    for table in TABLES
    for event in EVENTS
)
DROP_TRIGGERS = "".join(f"DROP TRIGGER ledger_stale_{event.lower()} ON {table};\n" for table in TABLES for event in EVENTS)


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0007_bill_reconciliation"),
        ("pricing", "0002_reprice_runs_to_jobrun"),
    ]

    operations = [
        migrations.RunSQL(MARK_STALE, "DROP FUNCTION ledger_days_mark_stale();"),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]
