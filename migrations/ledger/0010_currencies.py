# Currencies: the rate table, the days left unbooked for want of a rate, and the journal line's
# original amount, currency, rate and source (docs/currencies.md).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0008_partition_functions"),
        ("ledger", "0009_budget_holds"),
        ("pricing", "0002_reprice_runs_to_jobrun"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ExchangeRate",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("day", models.DateField(help_text="The accounting day (in the accounting time zone).")),
                (
                    "currency",
                    models.CharField(
                        choices=[("CNY", "Cny"), ("USD", "Usd")],
                        help_text="The priced currency, e.g. USD.",
                        max_length=3,
                    ),
                ),
                (
                    "to",
                    models.CharField(
                        choices=[("CNY", "Cny"), ("USD", "Usd")],
                        help_text="The functional currency, e.g. CNY.",
                        max_length=3,
                    ),
                ),
                (
                    "rate",
                    models.DecimalField(
                        decimal_places=10, help_text="Units of `to` per one unit of `currency`.", max_digits=20
                    ),
                ),
                (
                    "source",
                    models.CharField(help_text="Where the rate comes from, e.g. PBOC central parity.", max_length=200),
                ),
                ("entered_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["-day", "currency", "to"],
            },
        ),
        migrations.CreateModel(
            name="MissingRate",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("day", models.DateField()),
                ("currency", models.CharField(choices=[("CNY", "Cny"), ("USD", "Usd")], max_length=3)),
                ("to", models.CharField(choices=[("CNY", "Cny"), ("USD", "Usd")], max_length=3)),
                (
                    "amount",
                    models.DecimalField(
                        decimal_places=12, help_text="The unbooked cost, in `currency`.", max_digits=30
                    ),
                ),
                ("tokens", models.BigIntegerField(default=0)),
                ("noted_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["day", "currency"],
            },
        ),
        migrations.AddField(
            model_name="journalline",
            name="original_amount",
            field=models.DecimalField(blank=True, decimal_places=12, max_digits=30, null=True),
        ),
        migrations.AddField(
            model_name="journalline",
            name="original_currency",
            field=models.CharField(blank=True, choices=[("CNY", "Cny"), ("USD", "Usd")], max_length=3, null=True),
        ),
        migrations.AddField(
            model_name="journalline",
            name="rate",
            field=models.DecimalField(blank=True, decimal_places=10, max_digits=20, null=True),
        ),
        migrations.AddField(
            model_name="journalline",
            name="rate_source",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddConstraint(
            model_name="journalline",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("original_amount__isnull", True), ("original_currency__isnull", True), ("rate__isnull", True)
                    ),
                    models.Q(("original_amount__isnull", False), ("original_currency__isnull", False), ("rate__gt", 0)),
                    _connector="OR",
                ),
                name="ledger_line_original",
            ),
        ),
        migrations.AddField(
            model_name="exchangerate",
            name="entered_by",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddConstraint(
            model_name="missingrate",
            constraint=models.UniqueConstraint(fields=("day", "currency", "to"), name="ledger_missingrate_key"),
        ),
        migrations.AddConstraint(
            model_name="exchangerate",
            constraint=models.UniqueConstraint(fields=("day", "currency", "to"), name="ledger_rate_key"),
        ),
        migrations.AddConstraint(
            model_name="exchangerate",
            constraint=models.CheckConstraint(condition=models.Q(("rate__gt", 0)), name="ledger_rate_positive"),
        ),
        migrations.AddConstraint(
            model_name="exchangerate",
            constraint=models.CheckConstraint(
                condition=models.Q(("currency", models.F("to")), _negated=True), name="ledger_rate_pair"
            ),
        ),
        migrations.AddConstraint(
            model_name="exchangerate",
            constraint=models.CheckConstraint(
                condition=models.Q(("source", ""), _negated=True), name="ledger_rate_source"
            ),
        ),
    ]
