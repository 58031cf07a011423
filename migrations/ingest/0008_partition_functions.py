"""Partition DDL without DDL rights: the app's runtime role is DML-only (docs/security.md), yet
ingest creates a month's partition of ingest_record when its first record arrives, and retention
drops old ones. Both go through these SECURITY DEFINER functions, owned by the role that runs
the migrations: each does one fixed thing to ingest_record, with a fixed search_path, and only
roles granted EXECUTE (the runtime role, by `manage.py db_roles`) may call them.

Dropping a partition gives the caller nothing it could not do by DELETE; the function refuses
this month and later months all the same.
"""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION ingest_record_partition_name(month date) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
    SELECT 'ingest_record_y' || to_char(month, 'YYYY') || 'm' || to_char(month, 'MM')
$$;

CREATE FUNCTION ingest_record_partition_create(month date) RETURNS text
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

CREATE FUNCTION ingest_record_partition_drop(month date) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    first date := date_trunc('month', month)::date;
    name text := ingest_record_partition_name(first);
BEGIN
    IF first >= date_trunc('month', now() AT TIME ZONE 'UTC')::date THEN
        RAISE EXCEPTION 'the records of % are not before this month: retention never drops them',
            to_char(first, 'YYYY-MM') USING ERRCODE = 'P0001';
    END IF;
    IF to_regclass(format('public.%I', name)) IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('ALTER TABLE public.ingest_record DETACH PARTITION public.%I', name);
    EXECUTE format('DROP TABLE public.%I', name);
    RETURN name;
END $$;

REVOKE ALL ON FUNCTION ingest_record_partition_create(date) FROM PUBLIC;
REVOKE ALL ON FUNCTION ingest_record_partition_drop(date) FROM PUBLIC;
"""

REVERSE = """
DROP FUNCTION IF EXISTS ingest_record_partition_drop(date);
DROP FUNCTION IF EXISTS ingest_record_partition_create(date);
DROP FUNCTION IF EXISTS ingest_record_partition_name(date);
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0007_record_prompt_hash_ts_index")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
