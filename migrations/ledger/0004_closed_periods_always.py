"""Closed periods really closed (docs/ledger.md, "Closed periods").

1. Budgets and revenue of a closed month cannot be inserted, changed or deleted, by the same
   notion of closed as the journal (ledger_period.status, the row locked FOR SHARE so a close
   and a write serialise). Only the row's user column may change (a deleted user: SET NULL).
2. TRUNCATE is refused on the journal, the periods and the period events: always while a
   period is closed, and always for a role that is not a superuser. A superuser may empty them
   while no period is closed, which is how the test suite's flush resets the database; a
   superuser could drop the trigger anyway, so it is no boundary against one.
3. Every ledger trigger fires ALWAYS: `SET session_replication_role = replica` no longer
   skips them (it needs a superuser anyway; the runtime role cannot set it).
"""

from django.db import migrations

PLAN_GUARD = r"""
CREATE FUNCTION ledger_plan_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    what text := TG_ARGV[0];
    user_column text := TG_ARGV[1];
    months date[] := '{}';
    closed_month date;
BEGIN
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - user_column) = (to_jsonb(OLD) - user_column) THEN
        RETURN NEW;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        months := months || OLD.month;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        months := months || NEW.month;
    END IF;
    PERFORM 1 FROM ledger_period WHERE month = ANY(months) ORDER BY month FOR SHARE;
    SELECT min(month) INTO closed_month FROM ledger_period WHERE month = ANY(months) AND status = 'closed';
    IF closed_month IS NOT NULL THEN
        RAISE EXCEPTION '% is closed; reopen it (admin, with a reason) to change its %',
            to_char(closed_month, 'YYYY-MM'), what USING ERRCODE = 'P0001';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

CREATE TRIGGER ledger_budget_closed BEFORE INSERT OR UPDATE OR DELETE ON ledger_budget
    FOR EACH ROW EXECUTE FUNCTION ledger_plan_guard('budget', 'updated_by_id');
CREATE TRIGGER ledger_revenue_closed BEFORE INSERT OR UPDATE OR DELETE ON ledger_revenue
    FOR EACH ROW EXECUTE FUNCTION ledger_plan_guard('revenue', 'entered_by_id');
"""

TRUNCATE_GUARD = r"""
CREATE OR REPLACE FUNCTION ledger_journal_truncate_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledger_period WHERE status = 'closed') THEN
        RAISE EXCEPTION 'ledger has closed periods: % cannot be truncated', TG_TABLE_NAME USING ERRCODE = 'P0001';
    END IF;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION '% cannot be truncated: the ledger''s history is kept', TG_TABLE_NAME
            USING ERRCODE = 'P0001';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER ledger_period_lock_trunc BEFORE TRUNCATE ON ledger_period
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_journal_truncate_guard();
CREATE TRIGGER ledger_periodevent_lock_trunc BEFORE TRUNCATE ON ledger_periodevent
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_journal_truncate_guard();
"""

# Every trigger of a ledger table, whoever made it, so none is left firing only by origin.
ALWAYS = r"""
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname, g.tgname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
        WHERE NOT g.tgisinternal AND c.relname LIKE 'ledger\_%' AND c.relnamespace = current_schema()::regnamespace
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER %I', t.relname, t.tgname);
    END LOOP;
END $$;
"""

REVERSE = r"""
DROP TRIGGER IF EXISTS ledger_budget_closed ON ledger_budget;
DROP TRIGGER IF EXISTS ledger_revenue_closed ON ledger_revenue;
DROP FUNCTION IF EXISTS ledger_plan_guard();
DROP TRIGGER IF EXISTS ledger_period_lock_trunc ON ledger_period;
DROP TRIGGER IF EXISTS ledger_periodevent_lock_trunc ON ledger_periodevent;
CREATE OR REPLACE FUNCTION ledger_journal_truncate_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledger_period WHERE status = 'closed') THEN
        RAISE EXCEPTION 'ledger has closed periods: % cannot be truncated', TG_TABLE_NAME USING ERRCODE = 'P0001';
    END IF;
    RETURN NULL;
END $$;
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname, g.tgname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
        WHERE NOT g.tgisinternal AND c.relname LIKE 'ledger\_%' AND c.relnamespace = current_schema()::regnamespace
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE TRIGGER %I', t.relname, t.tgname);
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("ledger", "0003_seed_chart")]

    operations = [migrations.RunSQL(PLAN_GUARD + TRUNCATE_GUARD + ALWAYS, REVERSE)]
