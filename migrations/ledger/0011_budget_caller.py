# Budgets of one caller (the attribution map's name, the records' `caller` dim): docs/budgets.md.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0010_currencies"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="budget",
            name="ledger_budget_key",
        ),
        migrations.AddField(
            model_name="budget",
            name="caller",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="A caller of the attribution map ([callers.<name>]): its requests only. Empty: every caller.",
                max_length=256,
            ),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.UniqueConstraint(
                fields=("business_line", "team", "caller", "month"), name="ledger_budget_key"
            ),
        ),
    ]
