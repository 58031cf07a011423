"""The health rules' threshold parameters move into the one thresholds table
(classification.HealthThreshold), which the overview, the audit and the month-end checks read
too: a rule for every line sets the defaults row, a rule of one line that line's row (the newest
rule wins, as it did; a disabled rule is left as it was). The rule keeps its other parameters (window_hours, min_tokens)."""

from decimal import Decimal

from django.db import migrations

KEYS = ("effective_min", "waste_max", "cache_hit_min", "shadow_max")


def move(apps, schema_editor):
    Rule = apps.get_model("alerts", "Rule")
    HealthThreshold = apps.get_model("classification", "HealthThreshold")
    for rule in Rule.objects.filter(detector="health").order_by("pk"):
        found = {k: Decimal(str(rule.params[k])) for k in KEYS if k in rule.params}
        if not found or not rule.enabled:  # a disabled rule's values judged nothing: left as they were
            continue
        row, _ = HealthThreshold.objects.get_or_create(business_line=rule.business_line)
        for key, value in found.items():
            setattr(row, key, value)
        row.note = f"from alert rule {rule.name!r}"[:300]
        row.save()
        rule.params = {k: v for k, v in rule.params.items() if k not in KEYS}
        rule.save(update_fields=["params"])


class Migration(migrations.Migration):
    dependencies = [("alerts", "0005_alertstate_muted_until"), ("classification", "0010_health_threshold")]
    operations = [migrations.RunPython(move, migrations.RunPython.noop)]
