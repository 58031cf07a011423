"""Budget, Revenue, BudgetOverride moved to the plans app: state only, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0016_rates_to_currencies"),
        ("plans", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are (their db_table is kept): only Django's state moves.
            state_operations=[
                migrations.RemoveField(
                    model_name="budgetoverride",
                    name="budget",
                ),
                migrations.RemoveField(
                    model_name="budgetoverride",
                    name="granted_by",
                ),
                migrations.RemoveField(
                    model_name="revenue",
                    name="entered_by",
                ),
                migrations.DeleteModel(
                    name="Budget",
                ),
                migrations.DeleteModel(
                    name="BudgetOverride",
                ),
                migrations.DeleteModel(
                    name="Revenue",
                ),
            ],
            database_operations=[],
        ),
    ]
