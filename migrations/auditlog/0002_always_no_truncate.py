"""The audit log's append-only trigger fires ALWAYS (`session_replication_role = replica` does
not skip it), and TRUNCATE is refused for every role but a superuser (the test suite's flush
empties the table as one; a superuser could drop the trigger anyway). The app's runtime role
has no TRUNCATE privilege in the first place (docs/security.md)."""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION auditlog_truncate_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'auditlog_auditentry cannot be truncated: the audit log is kept' USING ERRCODE = 'P0001';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER auditlog_auditentry_no_truncate BEFORE TRUNCATE ON auditlog_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION auditlog_truncate_guard();
ALTER TABLE auditlog_auditentry ENABLE ALWAYS TRIGGER auditlog_auditentry_append_only;
ALTER TABLE auditlog_auditentry ENABLE ALWAYS TRIGGER auditlog_auditentry_no_truncate;
"""

REVERSE = """
ALTER TABLE auditlog_auditentry ENABLE TRIGGER auditlog_auditentry_append_only;
DROP TRIGGER IF EXISTS auditlog_auditentry_no_truncate ON auditlog_auditentry;
DROP FUNCTION IF EXISTS auditlog_truncate_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("auditlog", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
