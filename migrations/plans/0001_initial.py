"""Budget, Revenue, BudgetOverride, moved here from the ledger app with their tables (state only), and their
content types with them, so permissions and group grants stay."""

import apps.ledger.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("budget", "revenue", "budgetoverride")


def content_types_move(apps, schema_editor, old="ledger", new="plans"):
    """Each moved model's content type row changes app label (its permissions point at it), unless
    the new one exists already (a database that ran post_migrate in between): then it stays."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def content_types_back(apps, schema_editor):
    content_types_move(apps, schema_editor, old="plans", new="ledger")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        # the tables: created by the ledger before the move
        ("ledger", "0016_rates_to_currencies"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are (their db_table is kept): only Django's state moves.
            state_operations=[
                migrations.CreateModel(
                    name="Budget",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("business_line", models.CharField(max_length=256)),
                        (
                            "team",
                            models.CharField(
                                blank=True,
                                db_default="",
                                default="",
                                help_text="Empty: the whole business line.",
                                max_length=256,
                            ),
                        ),
                        (
                            "caller",
                            models.CharField(
                                blank=True,
                                db_default="",
                                default="",
                                help_text="A caller of the attribution map ([callers.<name>]): its requests only. Empty: every caller.",
                                max_length=256,
                            ),
                        ),
                        (
                            "hard",
                            models.BooleanField(
                                db_default=False,
                                default=False,
                                help_text="Hard: the edge refuses new requests once spent. Soft: alerts only.",
                            ),
                        ),
                        ("month", models.DateField(validators=[apps.ledger.models.validate_month])),
                        (
                            "currency",
                            models.CharField(blank=True, choices=[("CNY", "Cny"), ("USD", "Usd")], max_length=3),
                        ),
                        ("amount", models.DecimalField(blank=True, decimal_places=2, max_digits=20, null=True)),
                        ("tokens", models.BigIntegerField(blank=True, null=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "updated_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_budget",
                        "ordering": ["-month", "business_line"],
                    },
                ),
                migrations.CreateModel(
                    name="BudgetOverride",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("until", models.DateTimeField()),
                        ("reason", models.TextField()),
                        ("granted_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "budget",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="overrides", to="plans.budget"
                            ),
                        ),
                        (
                            "granted_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_budgetoverride",
                        "ordering": ["-until", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="Revenue",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("business_line", models.CharField(max_length=256)),
                        ("month", models.DateField(validators=[apps.ledger.models.validate_month])),
                        (
                            "currency",
                            models.CharField(choices=[("CNY", "Cny"), ("USD", "Usd")], default="CNY", max_length=3),
                        ),
                        ("amount", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("entered_at", models.DateTimeField(auto_now=True)),
                        (
                            "entered_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_revenue",
                        "ordering": ["-month", "business_line"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="budget",
                    constraint=models.UniqueConstraint(
                        fields=("business_line", "team", "caller", "month"), name="ledger_budget_key"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="budget",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("amount__isnull", False), ("tokens__isnull", False), _connector="OR"),
                        name="ledger_budget_some",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="budget",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("amount__isnull", True), models.Q(("currency", ""), _negated=True), _connector="OR"
                        ),
                        name="ledger_budget_amount_currency",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="budget",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("amount__gte", 0), ("amount__isnull", True), _connector="OR"),
                        name="ledger_budget_amount",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="budget",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("tokens__gte", 0), ("tokens__isnull", True), _connector="OR"),
                        name="ledger_budget_tokens",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="budget",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("month__day", 1)), name="ledger_budget_month"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="budgetoverride",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("reason", ""), _negated=True), name="ledger_budgetoverride_reason"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="revenue",
                    constraint=models.UniqueConstraint(
                        fields=("business_line", "month", "currency"), name="ledger_revenue_key"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="revenue",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("amount__gte", 0)), name="ledger_revenue_amount"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="revenue",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("month__day", 1)), name="ledger_revenue_month"
                    ),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_move, content_types_back),
    ]
