from __future__ import annotations

from django.db import migrations

# Frozen copy of apps.classification.engine.BUILTIN_REASONS at the time of this migration.
BUILTIN_REASONS = {
    1: "cache.prefix_cache",
    2: "effective.input",
    3: "effective.structural",
    4: "effective.output",
    5: "waste.error",
    6: "waste.timeout",
    7: "waste.aborted",
    8: "waste.rejected",
    9: "waste.duplicate",
    10: "waste.truncated",
    11: "waste.padding",
    12: "shadow.spec_rejected",
    13: "shadow.recompute",
    14: "shadow.unattributed",
}


def seed(apps, schema_editor):
    Reason = apps.get_model("classification", "Reason")
    for pk, name in BUILTIN_REASONS.items():
        Reason.objects.update_or_create(pk=pk, defaults={"name": name, "builtin": True})
    RuleSet = apps.get_model("classification", "RuleSet")
    if not RuleSet.objects.exists():
        from django.utils import timezone

        RuleSet.objects.create(version=1, name="built-in rules", status="active", activated_at=timezone.now())


class Migration(migrations.Migration):
    dependencies = [("classification", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
