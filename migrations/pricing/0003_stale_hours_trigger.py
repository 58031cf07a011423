"""Pricing learns which hours to price again from the class rollup itself: every statement that
changes classification_hourlyclass (ingest's upsert, a reclassified day's delete and insert)
notes the hours it touched in pricing_dirtyhour, committed with the change. Before, ingest and
classification called pricing to mark them. Statement-level, with the changed rows as a
transition table, so a batch costs one insert of its few distinct hours; the marks have no
unique key, so concurrent writers never wait on each other's marks."""

from django.db import migrations

MARK_STALE = """
CREATE FUNCTION pricing_hours_mark_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pricing_dirtyhour (hour)
    SELECT h.hour FROM (SELECT DISTINCT hour FROM changed) h
    WHERE NOT EXISTS (SELECT 1 FROM pricing_dirtyhour d WHERE d.hour = h.hour)
    ORDER BY 1;
    RETURN NULL;
END
$$;
"""
EVENTS = ("INSERT", "UPDATE", "DELETE")
TRIGGERS = "".join(
    f"CREATE TRIGGER pricing_stale_{event.lower()} AFTER {event} ON classification_hourlyclass "
    f"REFERENCING {'OLD' if event == 'DELETE' else 'NEW'} TABLE AS changed "
    "FOR EACH STATEMENT EXECUTE FUNCTION pricing_hours_mark_stale();\n"
    for event in EVENTS
)
DROP_TRIGGERS = "".join(f"DROP TRIGGER pricing_stale_{event.lower()} ON classification_hourlyclass;\n" for event in EVENTS)


class Migration(migrations.Migration):
    dependencies = [
        ("pricing", "0002_reprice_runs_to_jobrun"),
        ("classification", "0006_reclassify_runs_to_jobrun"),
    ]

    operations = [
        migrations.RunSQL(MARK_STALE, "DROP FUNCTION pricing_hours_mark_stale();"),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]
