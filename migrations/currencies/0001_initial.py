"""ExchangeRate, MissingRate, moved here from the ledger app with their tables (state only), and their
content types with them, so permissions and group grants stay."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("exchangerate", "missingrate")


def content_types_move(apps, schema_editor, old="ledger", new="currencies"):
    """Each moved model's content type row changes app label (its permissions point at it), unless
    the new one exists already (a database that ran post_migrate in between): then it stays."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def content_types_back(apps, schema_editor):
    content_types_move(apps, schema_editor, old="currencies", new="ledger")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        # the tables: created by the ledger before the move
        ("ledger", "0010_currencies"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are (their db_table is kept): only Django's state moves.
            state_operations=[
                migrations.CreateModel(
                    name="MissingRate",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
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
                        "db_table": "ledger_missingrate",
                        "ordering": ["day", "currency"],
                        "constraints": [
                            models.UniqueConstraint(fields=("day", "currency", "to"), name="ledger_missingrate_key")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ExchangeRate",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
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
                            models.CharField(
                                help_text="Where the rate comes from, e.g. PBOC central parity.", max_length=200
                            ),
                        ),
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
                        "db_table": "ledger_exchangerate",
                        "ordering": ["-day", "currency", "to"],
                        "constraints": [
                            models.UniqueConstraint(fields=("day", "currency", "to"), name="ledger_rate_key"),
                            models.CheckConstraint(condition=models.Q(("rate__gt", 0)), name="ledger_rate_positive"),
                            models.CheckConstraint(
                                condition=models.Q(("currency", models.F("to")), _negated=True), name="ledger_rate_pair"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("source", ""), _negated=True), name="ledger_rate_source"
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_move, content_types_back),
    ]
