from __future__ import annotations

from django.db import migrations, models

# The prompt-cache write component (engine.COMPONENTS[8]) and its built-in reason, frozen here.
NEW_REASONS = {17: "effective.cache_write"}


def seed(apps, schema_editor):
    Reason = apps.get_model("classification", "Reason")
    for pk, name in NEW_REASONS.items():
        Reason.objects.update_or_create(pk=pk, defaults={"name": name, "builtin": True})


def unseed(apps, schema_editor):
    apps.get_model("classification", "Reason").objects.filter(pk__in=NEW_REASONS).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('classification', '0011_verbose_names'),
    ]

    operations = [
        migrations.AlterField(
            model_name='hourlyclass',
            name='component',
            field=models.SmallIntegerField(choices=[(0, 'cached_prompt'), (1, 'uncached_prompt'), (2, 'structural'), (3, 'output'), (4, 'padding'), (5, 'spec_rejected'), (6, 'recomputed'), (7, 'reasoning'), (8, 'cache_write')]),
        ),
        migrations.RunPython(seed, unseed),
    ]
