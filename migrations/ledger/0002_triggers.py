"""Database-enforced rules of the ledger.

1. Closed periods are locked: statement triggers on ledger_journalentry and ledger_journalline
   refuse any INSERT, UPDATE or DELETE touching a row whose period is closed, and TRUNCATE
   while a closed period exists. They lock the periods' rows FOR SHARE first, so a close
   (which takes the period row FOR UPDATE) and a write to that period serialise: whichever
   commits second sees the other.
2. A line's period is its entry's: (entry_id, period) references (id, period) of the entry.
3. A closed period opens again only in a transaction that recorded a reopen event for it;
   a closed period cannot be deleted; period events cannot be changed or deleted.
4. Every insert or update of a mapping rule bumps its revision and keeps a snapshot; any
   change of mapping rules, elastic windows or accounts bumps the config version.
"""

from django.db import migrations

LOCK = r"""
CREATE FUNCTION ledger_assert_open(months date[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    closed_month date;
BEGIN
    IF months IS NULL OR cardinality(months) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM ledger_period WHERE month = ANY(months) ORDER BY month FOR SHARE;
    SELECT min(month) INTO closed_month FROM ledger_period WHERE month = ANY(months) AND status = 'closed';
    IF closed_month IS NOT NULL THEN
        RAISE EXCEPTION 'ledger period % is closed: its journal cannot change', to_char(closed_month, 'YYYY-MM')
            USING ERRCODE = 'P0001', HINT = 'post an adjusting entry in an open period, or reopen it (admin)';
    END IF;
END $$;

CREATE FUNCTION ledger_journal_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM ledger_assert_open(ARRAY(SELECT DISTINCT period FROM new_rows));
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM ledger_assert_open(ARRAY(SELECT DISTINCT period FROM old_rows));
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION ledger_journal_truncate_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledger_period WHERE status = 'closed') THEN
        RAISE EXCEPTION 'ledger has closed periods: % cannot be truncated', TG_TABLE_NAME USING ERRCODE = 'P0001';
    END IF;
    RETURN NULL;
END $$;
"""

TABLES = ("ledger_journalentry", "ledger_journalline")


def _table_triggers(table: str) -> str:
    return f"""
CREATE TRIGGER {table}_lock_ins AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_journal_guard();
CREATE TRIGGER {table}_lock_upd AFTER UPDATE ON {table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_journal_guard();
CREATE TRIGGER {table}_lock_del AFTER DELETE ON {table} REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_journal_guard();
CREATE TRIGGER {table}_lock_trunc BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_journal_truncate_guard();
"""


LINE_PERIOD_FK = """
ALTER TABLE ledger_journalline ADD CONSTRAINT ledger_line_entry_period_fk
    FOREIGN KEY (entry_id, period) REFERENCES ledger_journalentry (id, period) ON DELETE CASCADE
    DEFERRABLE INITIALLY DEFERRED;
"""

PERIOD = r"""
CREATE FUNCTION ledger_period_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.status = 'closed' THEN
            RAISE EXCEPTION 'ledger period % is closed and cannot be deleted', to_char(OLD.month, 'YYYY-MM')
                USING ERRCODE = 'P0001';
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.status = 'closed' AND NEW.month <> OLD.month THEN
        RAISE EXCEPTION 'ledger period % is closed: its month cannot change', to_char(OLD.month, 'YYYY-MM')
            USING ERRCODE = 'P0001';
    END IF;
    IF OLD.status = 'closed' AND NEW.status <> 'closed' AND NOT EXISTS (
        SELECT 1 FROM ledger_periodevent e
        WHERE e.period_id = OLD.id AND e.action = 'reopen' AND e.txid = txid_current()
    ) THEN
        RAISE EXCEPTION 'ledger period % can only be reopened with a recorded reopen event',
            to_char(OLD.month, 'YYYY-MM') USING ERRCODE = 'P0001', HINT = 'manage.py reopen_period (admin)';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER ledger_period_guard BEFORE UPDATE OR DELETE ON ledger_period
    FOR EACH ROW EXECUTE FUNCTION ledger_period_guard();

CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'P0001';
END $$;

CREATE TRIGGER ledger_periodevent_append_only BEFORE UPDATE OR DELETE ON ledger_periodevent
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
"""

CONFIG = r"""
INSERT INTO ledger_configversion (id, version) VALUES (1, 1);

CREATE FUNCTION ledger_rule_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (to_jsonb(NEW) - 'revision' - 'updated_at') IS NOT DISTINCT FROM (to_jsonb(OLD) - 'revision' - 'updated_at') THEN
            NEW.revision := OLD.revision;
            RETURN NEW;
        END IF;
        NEW.revision := OLD.revision + 1;
    ELSE
        NEW.revision := 1;
    END IF;
    INSERT INTO ledger_mappingrulerevision (rule_id, revision, snapshot, changed_at)
        VALUES (NEW.id, NEW.revision, to_jsonb(NEW), now());
    RETURN NEW;
END $$;

CREATE TRIGGER ledger_mappingrule_revision BEFORE INSERT OR UPDATE ON ledger_mappingrule
    FOR EACH ROW EXECUTE FUNCTION ledger_rule_revision();

CREATE FUNCTION ledger_config_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ledger_configversion SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END $$;
"""

CONFIG_TABLES = ("ledger_mappingrule", "ledger_elasticwindow", "ledger_account")


def _bump_trigger(table: str) -> str:
    return (
        f"CREATE TRIGGER {table}_config_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION ledger_config_bump();"
    )


FORWARD = "\n".join(
    [LOCK, *map(_table_triggers, TABLES), LINE_PERIOD_FK, PERIOD, CONFIG, *map(_bump_trigger, CONFIG_TABLES)]
)

REVERSE = (
    """
DROP TRIGGER IF EXISTS ledger_mappingrule_config_bump ON ledger_mappingrule;
DROP TRIGGER IF EXISTS ledger_elasticwindow_config_bump ON ledger_elasticwindow;
DROP TRIGGER IF EXISTS ledger_account_config_bump ON ledger_account;
DROP TRIGGER IF EXISTS ledger_mappingrule_revision ON ledger_mappingrule;
DROP FUNCTION IF EXISTS ledger_config_bump();
DROP FUNCTION IF EXISTS ledger_rule_revision();
DELETE FROM ledger_configversion;
DROP TRIGGER IF EXISTS ledger_periodevent_append_only ON ledger_periodevent;
DROP FUNCTION IF EXISTS ledger_append_only();
DROP TRIGGER IF EXISTS ledger_period_guard ON ledger_period;
DROP FUNCTION IF EXISTS ledger_period_guard();
ALTER TABLE ledger_journalline DROP CONSTRAINT IF EXISTS ledger_line_entry_period_fk;
"""
    + "\n".join(
        f"DROP TRIGGER IF EXISTS {t}_lock_{op} ON {t};" for t in TABLES for op in ("ins", "upd", "del", "trunc")
    )
    + """
DROP FUNCTION IF EXISTS ledger_journal_truncate_guard();
DROP FUNCTION IF EXISTS ledger_journal_guard();
DROP FUNCTION IF EXISTS ledger_assert_open(date[]);
"""
)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
