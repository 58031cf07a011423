"""ReclassifyRun rows move into common.JobRun (kind "reclassify", key the rule set id), so a
run interrupted before the upgrade resumes after it; then the old table goes."""

from django.db import migrations

FORWARD = """
INSERT INTO common_jobrun (kind, key, start, "end", next_day, status, error, started_at, updated_at, finished_at)
SELECT 'reclassify', ruleset_id::text, start, "end", next_day, status, error, started_at, updated_at, finished_at
FROM classification_reclassifyrun ORDER BY id
"""
# Back: the runs of rule sets that still exist (the old table's foreign key needs one).
BACKWARD = """
INSERT INTO classification_reclassifyrun
    (start, "end", ruleset_id, next_day, status, error, started_at, updated_at, finished_at)
SELECT run.start, run."end", rs.id, run.next_day, run.status, run.error, run.started_at, run.updated_at,
       run.finished_at
FROM common_jobrun run JOIN classification_ruleset rs ON rs.id::text = run.key
WHERE run.kind = 'reclassify' ORDER BY run.id;
DELETE FROM common_jobrun WHERE kind = 'reclassify';
"""


class Migration(migrations.Migration):
    dependencies = [
        ("classification", "0005_hourlyclass_no_fk_checks"),
        ("common", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.DeleteModel(name="ReclassifyRun"),
    ]
