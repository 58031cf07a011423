"""ExchangeRate, MissingRate moved to the currencies app: state only, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0015_bills_to_reconciliation"),
        ("currencies", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are (their db_table is kept): only Django's state moves.
            state_operations=[
                migrations.RemoveField(
                    model_name="exchangerate",
                    name="entered_by",
                ),
                migrations.DeleteModel(
                    name="MissingRate",
                ),
                migrations.DeleteModel(
                    name="ExchangeRate",
                ),
            ],
            database_operations=[],
        ),
    ]
