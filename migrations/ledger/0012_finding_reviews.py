# Who resolved or accepted each month-end finding, and why (apps/ledger/services/closing.py).

import apps.ledger.models
import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0011_budget_caller"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="FindingReview",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("period", models.DateField(validators=[apps.ledger.models.validate_month])),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("effective_share_low", "Effective Share Low"),
                            ("elastic_over_revenue", "Elastic Over Revenue"),
                            ("revenue_missing", "Revenue Missing"),
                            ("structural_zero", "Structural Zero"),
                            ("bill_unreconciled", "Bill Unreconciled"),
                        ],
                        max_length=24,
                    ),
                ),
                (
                    "business_line",
                    models.CharField(blank=True, help_text="Empty for the whole company.", max_length=256),
                ),
                (
                    "decision",
                    models.CharField(choices=[("resolved", "Resolved"), ("accepted", "Accepted")], max_length=8),
                ),
                ("note", models.TextField(blank=True, help_text="What was done, or why the finding is accepted.")),
                (
                    "figures",
                    models.JSONField(default=dict, help_text="The finding's figures as the reviewer saw them."),
                ),
                ("reviewed_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                (
                    "reviewed_by",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={
                "ordering": ["-period", "kind", "business_line"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("period", "kind", "business_line"), name="ledger_finding_review_key"
                    ),
                    models.CheckConstraint(condition=models.Q(("period__day", 1)), name="ledger_finding_review_month"),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("decision", "resolved"), models.Q(("note", ""), _negated=True), _connector="OR"
                        ),
                        name="ledger_finding_review_reason",
                    ),
                ],
            },
        ),
    ]
