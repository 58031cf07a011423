"""RepriceRun rows move into common.JobRun (kind "reprice"), so a run interrupted before the
upgrade resumes after it; then the old table goes."""

from django.db import migrations

FORWARD = """
INSERT INTO common_jobrun (kind, key, start, "end", next_day, status, error, started_at, updated_at, finished_at)
SELECT 'reprice', '', start, "end", next_day, status, error, started_at, updated_at, finished_at
FROM pricing_repricerun ORDER BY id
"""
BACKWARD = """
INSERT INTO pricing_repricerun (start, "end", next_day, status, error, started_at, updated_at, finished_at)
SELECT start, "end", next_day, status, error, started_at, updated_at, finished_at
FROM common_jobrun WHERE kind = 'reprice' ORDER BY id;
DELETE FROM common_jobrun WHERE kind = 'reprice';
"""


class Migration(migrations.Migration):
    dependencies = [
        ("pricing", "0001_initial"),
        ("common", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.DeleteModel(name="RepriceRun"),
    ]
