# Budgets that hold: a team scope, hard budgets, and their temporary overrides (docs/budgets.md).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0008_stale_days_trigger"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="BudgetOverride",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("until", models.DateTimeField()),
                ("reason", models.TextField()),
                ("granted_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["-until", "-id"],
            },
        ),
        migrations.RemoveConstraint(
            model_name="budget",
            name="ledger_budget_key",
        ),
        migrations.AddField(
            model_name="budget",
            name="hard",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Hard: the edge refuses new requests once spent. Soft: alerts only.",
            ),
        ),
        migrations.AddField(
            model_name="budget",
            name="team",
            field=models.CharField(
                blank=True, db_default="", default="", help_text="Empty: the whole business line.", max_length=256
            ),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.UniqueConstraint(fields=("business_line", "team", "month"), name="ledger_budget_key"),
        ),
        migrations.AddField(
            model_name="budgetoverride",
            name="budget",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="overrides", to="ledger.budget"
            ),
        ),
        migrations.AddField(
            model_name="budgetoverride",
            name="granted_by",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddConstraint(
            model_name="budgetoverride",
            constraint=models.CheckConstraint(
                condition=models.Q(("reason", ""), _negated=True), name="ledger_budgetoverride_reason"
            ),
        ),
    ]
