"""Supplier, Bill, BillLine, BillRowError and BillAdjustment, moved here from the ledger app with
their tables (state only), and their content types with them, so permissions and group grants
stay."""

from decimal import Decimal

import django.contrib.postgres.fields
import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

MOVED = ("supplier", "bill", "billline", "billrowerror", "billadjustment")


def content_types_move(apps, schema_editor, old="ledger", new="reconciliation"):
    """Each moved model's content type row changes app label (its permissions point at it), unless
    the new one exists already (a database that ran post_migrate in between): then it stays."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def content_types_back(apps, schema_editor):
    content_types_move(apps, schema_editor, old="reconciliation", new="ledger")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("ledger", "0015_bills_to_reconciliation"),
        ("pricing", "0005_hourlycost_rollup_refs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are (their db_table is kept): only Django's state moves.
            state_operations=[
                migrations.CreateModel(
                    name="Bill",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("month", models.DateField()),
                        (
                            "state",
                            models.CharField(
                                choices=[("accepted", "Accepted"), ("refused", "Refused"), ("replaced", "Replaced")],
                                max_length=8,
                            ),
                        ),
                        ("filename", models.CharField(blank=True, max_length=300)),
                        ("sha256", models.CharField(max_length=64)),
                        ("rows", models.PositiveIntegerField(default=0, help_text="Data rows in the file.")),
                        ("currency", models.CharField(choices=[("CNY", "Cny"), ("USD", "Usd")], max_length=3)),
                        ("total", models.DecimalField(decimal_places=2, default=Decimal("0"), max_digits=20)),
                        ("imported_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        (
                            "imported_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_bill",
                        "ordering": ["-imported_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="BillLine",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "row",
                            models.PositiveIntegerField(help_text="Line number in the file (the header is line 1)."),
                        ),
                        ("day", models.DateField()),
                        ("model", models.CharField(max_length=200)),
                        ("key", models.CharField(blank=True, max_length=256)),
                        ("input_tokens", models.BigIntegerField(null=True)),
                        ("output_tokens", models.BigIntegerField(null=True)),
                        ("amount", models.DecimalField(decimal_places=6, max_digits=20)),
                        (
                            "bill",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="lines",
                                to="reconciliation.bill",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_billline",
                        "ordering": ["bill", "row"],
                    },
                ),
                migrations.CreateModel(
                    name="BillRowError",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("row", models.PositiveIntegerField()),
                        ("raw", models.TextField()),
                        ("reason", models.TextField()),
                        (
                            "bill",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="errors",
                                to="reconciliation.bill",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_billrowerror",
                        "ordering": ["bill", "row"],
                    },
                ),
                migrations.CreateModel(
                    name="Supplier",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "name",
                            models.CharField(
                                help_text="Used on the command line: import_bill NAME ...", max_length=100, unique=True
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[("hosted", "hosted API (priced usage)"), ("pool", "GPU pool (pool cost)")],
                                default="hosted",
                                max_length=6,
                            ),
                        ),
                        (
                            "currency",
                            models.CharField(choices=[("CNY", "Cny"), ("USD", "Usd")], default="CNY", max_length=3),
                        ),
                        (
                            "model_patterns",
                            django.contrib.postgres.fields.ArrayField(
                                base_field=models.CharField(max_length=200),
                                blank=True,
                                default=list,
                                help_text="Hosted: the platform's model names or globs this supplier serves (gpt-4o*).",
                                size=None,
                            ),
                        ),
                        (
                            "model_aliases",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text='The bill\'s model name -> the platform\'s, e.g. {"GPT-4o": "gpt-4o"}.',
                            ),
                        ),
                        (
                            "key_dim",
                            models.CharField(
                                blank=True,
                                help_text="The record dimension the bill's key/project column matches (project).",
                                max_length=64,
                            ),
                        ),
                        (
                            "cost_centre",
                            models.CharField(
                                blank=True,
                                help_text="Cost centre of differences no single business line explains.",
                                max_length=256,
                            ),
                        ),
                        ("col_day", models.CharField(default="date", max_length=100)),
                        ("col_model", models.CharField(blank=True, default="model", max_length=100)),
                        ("col_input_tokens", models.CharField(blank=True, max_length=100)),
                        ("col_output_tokens", models.CharField(blank=True, max_length=100)),
                        ("col_amount", models.CharField(default="amount", max_length=100)),
                        ("col_currency", models.CharField(blank=True, max_length=100)),
                        (
                            "col_key",
                            models.CharField(
                                blank=True, help_text="The key or project column, if matched by key.", max_length=100
                            ),
                        ),
                        (
                            "date_format",
                            models.CharField(
                                default="%Y-%m-%d", help_text="strptime format of the day column.", max_length=40
                            ),
                        ),
                        (
                            "decimal_separator",
                            models.CharField(choices=[(".", "1,234.56"), (",", "1.234,56")], default=".", max_length=1),
                        ),
                        ("delimiter", models.CharField(default=",", max_length=1)),
                        ("amount_abs", models.DecimalField(decimal_places=6, default=Decimal("0.01"), max_digits=20)),
                        ("amount_rel", models.DecimalField(decimal_places=6, default=Decimal("0"), max_digits=9)),
                        ("tokens_abs", models.BigIntegerField(default=0)),
                        ("tokens_rel", models.DecimalField(decimal_places=6, default=Decimal("0"), max_digits=9)),
                        (
                            "finding_threshold",
                            models.DecimalField(
                                decimal_places=2,
                                default=Decimal("100.00"),
                                help_text="Unreconciled amount raising a finding.",
                                max_digits=20,
                            ),
                        ),
                        ("active", models.BooleanField(default=True)),
                        (
                            "pool",
                            models.ForeignKey(
                                blank=True,
                                help_text="GPU pool suppliers.",
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="pricing.costpool",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_supplier",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="BillAdjustment",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("month", models.DateField(help_text="The bill's month.")),
                        (
                            "state",
                            models.CharField(
                                choices=[("proposed", "Proposed"), ("posted", "Posted"), ("rejected", "Rejected")],
                                default="proposed",
                                max_length=8,
                            ),
                        ),
                        ("currency", models.CharField(choices=[("CNY", "Cny"), ("USD", "Usd")], max_length=3)),
                        (
                            "amount",
                            models.DecimalField(
                                decimal_places=2, help_text="Bill minus platform, summed.", max_digits=20
                            ),
                        ),
                        (
                            "lines",
                            models.JSONField(
                                default=list,
                                help_text="[{day, model, key, business_line, amount, tokens}]: what each difference adds.",
                            ),
                        ),
                        ("note", models.TextField(blank=True)),
                        ("proposed_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ("decided_at", models.DateTimeField(blank=True, null=True)),
                        ("decision_note", models.TextField(blank=True)),
                        (
                            "decided_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "entry",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="ledger.journalentry",
                            ),
                        ),
                        (
                            "proposed_by",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "supplier",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="adjustments",
                                to="reconciliation.supplier",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ledger_billadjustment",
                        "ordering": ["-proposed_at", "-id"],
                    },
                ),
                migrations.AddField(
                    model_name="bill",
                    name="supplier",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="bills", to="reconciliation.supplier"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="supplier",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("kind", "hosted"), ("pool__isnull", False), _connector="OR"),
                        name="ledger_supplier_pool_has_pool",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="supplier",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("amount_abs__gte", 0),
                            ("amount_rel__gte", 0),
                            ("tokens_abs__gte", 0),
                            ("tokens_rel__gte", 0),
                        ),
                        name="ledger_supplier_tolerances",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="billadjustment",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("month__day", 1)), name="ledger_billadjustment_month"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="billadjustment",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("entry__isnull", False), ("state", "posted")),
                            models.Q(models.Q(("state", "posted"), _negated=True), ("entry__isnull", True)),
                            _connector="OR",
                        ),
                        name="ledger_billadjustment_entry",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="bill",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("state", "accepted")),
                        fields=("supplier", "month"),
                        name="ledger_bill_one_accepted",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="bill",
                    constraint=models.CheckConstraint(condition=models.Q(("month__day", 1)), name="ledger_bill_month"),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_move, content_types_back),
    ]
