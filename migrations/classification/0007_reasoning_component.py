from __future__ import annotations

from django.db import migrations, models

# The reasoning component (engine.COMPONENTS[7]) and its two built-in reasons, frozen here.
NEW_REASONS = {15: "effective.reasoning", 16: "waste.reasoning_overspend"}


def seed(apps, schema_editor):
    Reason = apps.get_model("classification", "Reason")
    for pk, name in NEW_REASONS.items():
        Reason.objects.update_or_create(pk=pk, defaults={"name": name, "builtin": True})


def unseed(apps, schema_editor):
    apps.get_model("classification", "Reason").objects.filter(pk__in=NEW_REASONS).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('classification', '0006_reclassify_runs_to_jobrun'),
    ]

    operations = [
        migrations.AlterField(
            model_name='hourlyclass',
            name='component',
            field=models.SmallIntegerField(choices=[(0, 'cached_prompt'), (1, 'uncached_prompt'), (2, 'structural'), (3, 'output'), (4, 'padding'), (5, 'spec_rejected'), (6, 'recomputed'), (7, 'reasoning')]),
        ),
        migrations.RunPython(seed, unseed),
    ]
