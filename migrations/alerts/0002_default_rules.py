from __future__ import annotations

from datetime import timedelta

from django.db import migrations

DEFAULT_RULES = [
    ("Spike per business line", "spike", {"by": "business_line"}, 20),
    ("Spike per model", "spike", {"by": "model"}, 20),
    ("Unit cost rising", "trend", {}, 20),
    ("Budget", "budget", {}, 20),
    ("Health ratios", "health", {}, 20),
    ("Unattributed tokens", "unattributed", {}, 20),
    ("Rejected records", "dead_letters", {}, 20),
    ("Collector silent", "collector_silent", {}, 30),
    ("Month-end findings", "ledger_finding", {}, 20),
]


def create(apps, schema_editor):
    Rule = apps.get_model("alerts", "Rule")
    for name, detector, params, severity in DEFAULT_RULES:
        Rule.objects.get_or_create(
            name=name,
            defaults={"detector": detector, "params": params, "severity": severity, "cooldown": timedelta(hours=1)},
        )


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial")]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
