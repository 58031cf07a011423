"""A batch that waited for another to create a month's partition found no table and tried to
create it again (DuplicateTable, a 500 on the first batches of a new month): after the advisory
lock, `to_regclass` still answered from the backend's catalog cache, which had noted the table's
absence before the wait and was not told of its creation (an advisory lock reads no invalidation
messages). The check after the wait now reads pg_class with a fresh snapshot."""

from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION ingest_record_partition_create(month date) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    first date := date_trunc('month', month)::date;
    name text := ingest_record_partition_name(first);
BEGIN
    IF to_regclass(format('public.%I', name)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    -- Two batches of a new month: the second waits here, then finds the table. It looks in
    -- pg_class itself: the catalog cache behind to_regclass may still hold the table's absence.
    PERFORM pg_advisory_xact_lock(6743, (extract(year FROM first) * 12 + extract(month FROM first))::int);
    IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE c.relname = name AND n.nspname = 'public') THEN
        RETURN NULL;
    END IF;
    EXECUTE format(
        'CREATE TABLE public.%I PARTITION OF public.ingest_record FOR VALUES FROM (%L) TO (%L)',
        name, first::text || ' 00:00:00+00', (first + interval '1 month')::date::text || ' 00:00:00+00'
    );
    RETURN name;
END $$;
"""
BEFORE = r"""
CREATE OR REPLACE FUNCTION ingest_record_partition_create(month date) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    first date := date_trunc('month', month)::date;
    name text := ingest_record_partition_name(first);
BEGIN
    IF to_regclass(format('public.%I', name)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    -- Two batches of a new month: the second waits here, then finds the table.
    PERFORM pg_advisory_xact_lock(6743, (extract(year FROM first) * 12 + extract(month FROM first))::int);
    IF to_regclass(format('public.%I', name)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format(
        'CREATE TABLE public.%I PARTITION OF public.ingest_record FOR VALUES FROM (%L) TO (%L)',
        name, first::text || ' 00:00:00+00', (first + interval '1 month')::date::text || ' 00:00:00+00'
    );
    RETURN name;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0008_partition_functions")]

    operations = [migrations.RunSQL(FUNCTION, BEFORE)]
