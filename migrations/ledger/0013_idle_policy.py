# Who pays for idle capacity (apps/ledger/idle/, docs/ledger.md "Idle capacity"): the policy from a
# month on and the lines' reserved shares of the pools. A change to either bumps the mapping's config
# version, as a rule's does, so the next accrual books every day of the open months again.

import apps.ledger.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

CONFIG_TABLES = ("ledger_idlepolicy", "ledger_reservedshare")

# A setting holds from its month until the next one of its series (every policy row; a pool's
# line's shares): a row whose old or new range holds a closed month is not inserted, changed or
# deleted, whoever writes it (the models' validation says so first, as ledger_plan_guard does for
# budgets). The periods in range are locked for share, so a close waits for the change or sees it.
GUARD = r"""
CREATE FUNCTION ledger_idle_setting_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rows jsonb[] := '{}';
    r jsonb;
    later date;
    closed_month date;
BEGIN
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - 'changed_by_id' - 'changed_at')
                          = (to_jsonb(OLD) - 'changed_by_id' - 'changed_at') THEN
        RETURN NEW;
    END IF;
    IF TG_OP <> 'INSERT' THEN rows := rows || to_jsonb(OLD); END IF;
    IF TG_OP <> 'DELETE' THEN rows := rows || to_jsonb(NEW); END IF;
    FOREACH r IN ARRAY rows LOOP
        IF TG_TABLE_NAME = 'ledger_idlepolicy' THEN
            SELECT min(month) INTO later FROM ledger_idlepolicy
            WHERE month > (r->>'month')::date AND id <> (r->>'id')::bigint;
        ELSE
            SELECT min(month) INTO later FROM ledger_reservedshare
            WHERE pool_id = (r->>'pool_id')::bigint AND business_line = r->>'business_line'
              AND month > (r->>'month')::date AND id <> (r->>'id')::bigint;
        END IF;
        PERFORM 1 FROM ledger_period WHERE month >= (r->>'month')::date AND (later IS NULL OR month < later)
            ORDER BY month FOR SHARE;
        SELECT min(month) INTO closed_month FROM ledger_period
        WHERE status = 'closed' AND month >= (r->>'month')::date AND (later IS NULL OR month < later);
        IF closed_month IS NOT NULL THEN
            RAISE EXCEPTION '% is closed and this % applies to it; reopen it (admin, with a reason) first',
                to_char(closed_month, 'YYYY-MM'), TG_ARGV[0] USING ERRCODE = 'P0001';
        END IF;
    END LOOP;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

CREATE TRIGGER ledger_idlepolicy_closed BEFORE INSERT OR UPDATE OR DELETE ON ledger_idlepolicy
    FOR EACH ROW EXECUTE FUNCTION ledger_idle_setting_guard('idle policy');
CREATE TRIGGER ledger_reservedshare_closed BEFORE INSERT OR UPDATE OR DELETE ON ledger_reservedshare
    FOR EACH ROW EXECUTE FUNCTION ledger_idle_setting_guard('reserved share');
"""
UNGUARD = """
DROP TRIGGER IF EXISTS ledger_idlepolicy_closed ON ledger_idlepolicy;
DROP TRIGGER IF EXISTS ledger_reservedshare_closed ON ledger_reservedshare;
DROP FUNCTION IF EXISTS ledger_idle_setting_guard();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0012_finding_reviews'),
        ('pricing', '0005_hourlycost_rollup_refs'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='IdlePolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateField(help_text='The first month it applies to.', unique=True, validators=[apps.ledger.models.validate_month])),
                ('policy', models.CharField(choices=[('showback', 'showback: idle stays a platform cost'), ('by_use', 'by use: the lines that used the pool in the hour, in proportion'), ('reserved', "by reserved share: each line's reserved share of the pool")], max_length=8)),
                ('note', models.TextField(blank=True, help_text='Why, e.g. the decision that set it.')),
                ('changed_at', models.DateTimeField(auto_now=True)),
                ('changed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'idle policies',
                'ordering': ['-month'],
                'constraints': [models.CheckConstraint(condition=models.Q(('month__day', 1)), name='ledger_idlepolicy_month')],
            },
        ),
        migrations.CreateModel(
            name='ReservedShare',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('business_line', models.CharField(max_length=256)),
                ('month', models.DateField(help_text='The first month it applies to.', validators=[apps.ledger.models.validate_month])),
                ('percent', models.DecimalField(decimal_places=4, help_text="0 to 100; a pool's shares add up to 100 at most.", max_digits=7)),
                ('note', models.TextField(blank=True)),
                ('changed_at', models.DateTimeField(auto_now=True)),
                ('changed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='pricing.costpool')),
            ],
            options={
                'ordering': ['pool', '-month', 'business_line'],
                'constraints': [models.UniqueConstraint(fields=('pool', 'business_line', 'month'), name='ledger_reservedshare_key'), models.CheckConstraint(condition=models.Q(('month__day', 1)), name='ledger_reservedshare_month'), models.CheckConstraint(condition=models.Q(('percent__gte', 0), ('percent__lte', 100)), name='ledger_reservedshare_percent')],
            },
        ),
        migrations.RunSQL(
            "\n".join(
                f"CREATE TRIGGER {t}_config_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {t} "
                "FOR EACH STATEMENT EXECUTE FUNCTION ledger_config_bump();"
                for t in CONFIG_TABLES
            ),
            "\n".join(f"DROP TRIGGER IF EXISTS {t}_config_bump ON {t};" for t in CONFIG_TABLES),
        ),
        migrations.RunSQL(GUARD, UNGUARD),
        # As every trigger of the books (0004): fired even under session_replication_role = replica.
        migrations.RunSQL(
            "\n".join(
                f"ALTER TABLE {t} ENABLE ALWAYS TRIGGER {g};"
                for t in CONFIG_TABLES
                for g in (f"{t}_config_bump", f"{t}_closed")
            ),
            migrations.RunSQL.noop,
        ),
    ]
