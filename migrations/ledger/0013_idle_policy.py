# Who pays for idle capacity (apps/ledger/idle/, docs/ledger.md "Idle capacity"): the policy from a
# month on and the lines' reserved shares of the pools. A change to either bumps the mapping's config
# version, as a rule's does, so the next accrual books every day of the open months again.

import apps.ledger.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

CONFIG_TABLES = ("ledger_idlepolicy", "ledger_reservedshare")


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
    ]
