"""classification_dirtyday is marked like every consumer's mark table (apps.common.rollup.Marks):
a day already marked is skipped by its key instead of having the time of its latest mark
written, which nothing read."""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("classification", "0012_cache_write_component")]

    operations = [migrations.RemoveField(model_name="dirtyday", name="marked_at")]
