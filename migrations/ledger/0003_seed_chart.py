"""The default chart of accounts (seed 003 and the brief) and the default mapping rules.
Both are editable afterwards (admin); rule edits are kept as revisions."""

from django.db import migrations

ACCOUNTS = [
    # code, name, kind, role, description
    ("6401.01", "Effective token expense", "expense", "effective", "Cost of revenue: tokens that bought value."),
    ("6401.02", "Structural token expense", "expense", "structural", "IT build cost: JSON scaffolding, templates."),
    ("6401.03", "Elastic token expense", "expense", "elastic", "Marketing: tokens in declared campaign/peak windows."),
    ("6401.04", "Waste token expense", "expense", "waste", "Tokens that bought nothing."),
    ("6401.05", "Shadow / overhead compute", "expense", "shadow", "Compute no request shows: drafts, recompute."),
    ("6401.06", "Idle capacity", "expense", "idle", "Self-hosted pool hours the tokens did not use."),
    ("2241", "Accrued compute payable", "liability", "payable", "Internal recharge of the token expense."),
]

RULES = [
    # priority, name, applies_to, token_class, reason, elastic, account code
    (10, "Inside an elastic window", "usage", "", "", "inside", "6401.03"),
    (20, "Structural output", "usage", "", "effective.structural", "any", "6401.02"),
    (30, "Effective", "usage", "effective", "", "any", "6401.01"),
    (40, "Cache", "usage", "cache", "", "any", "6401.01"),
    (50, "Waste", "usage", "waste", "", "any", "6401.04"),
    (60, "Shadow", "usage", "shadow", "", "any", "6401.05"),
    (100, "Pool idle capacity", "idle", "", "", "any", "6401.06"),
]


def seed(apps, schema_editor):
    Account = apps.get_model("ledger", "Account")
    MappingRule = apps.get_model("ledger", "MappingRule")
    by_code = {}
    for code, name, kind, role, description in ACCOUNTS:
        by_code[code] = Account.objects.create(code=code, name=name, kind=kind, role=role, description=description)
    for priority, name, applies_to, token_class, reason, elastic, code in RULES:
        MappingRule.objects.create(
            priority=priority,
            name=name,
            applies_to=applies_to,
            token_class=token_class,
            reason=reason,
            dims={},
            elastic=elastic,
            account=by_code[code],
        )


def unseed(apps, schema_editor):
    apps.get_model("ledger", "MappingRule").objects.all().delete()
    apps.get_model("ledger", "Account").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("ledger", "0002_triggers")]

    operations = [migrations.RunPython(seed, unseed)]
