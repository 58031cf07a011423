"""Supplier, Bill, BillLine, BillRowError and BillAdjustment moved to the reconciliation app:
state only, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0014_dayreading"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are (their db_table is kept): only Django's state moves.
            state_operations=[
                migrations.RemoveField(
                    model_name="bill",
                    name="imported_by",
                ),
                migrations.RemoveField(
                    model_name="bill",
                    name="supplier",
                ),
                migrations.RemoveField(
                    model_name="billline",
                    name="bill",
                ),
                migrations.RemoveField(
                    model_name="billadjustment",
                    name="decided_by",
                ),
                migrations.RemoveField(
                    model_name="billadjustment",
                    name="entry",
                ),
                migrations.RemoveField(
                    model_name="billadjustment",
                    name="proposed_by",
                ),
                migrations.RemoveField(
                    model_name="billadjustment",
                    name="supplier",
                ),
                migrations.RemoveField(
                    model_name="supplier",
                    name="pool",
                ),
                migrations.DeleteModel(
                    name="BillRowError",
                ),
                migrations.DeleteModel(
                    name="Bill",
                ),
                migrations.DeleteModel(
                    name="BillLine",
                ),
                migrations.DeleteModel(
                    name="BillAdjustment",
                ),
                migrations.DeleteModel(
                    name="Supplier",
                ),
            ],
            database_operations=[],
        ),
    ]
