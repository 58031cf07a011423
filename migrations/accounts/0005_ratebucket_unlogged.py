from django.db import migrations


class Migration(migrations.Migration):
    """Rate buckets are unlogged: an update writes no WAL, so taking from a bucket commits
    without waiting for a disk flush. After a crash the table is empty: every bucket starts
    full again, which a rate limit can afford."""

    dependencies = [("accounts", "0004_rate_limits")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE accounts_ratebucket SET UNLOGGED", "ALTER TABLE accounts_ratebucket SET LOGGED"
        ),
    ]
