from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from apps.ingest.retention import partitions_drop_expired, rejections_delete_expired, retention_horizon


class Command(BaseCommand):
    help = (
        "Drop the monthly partitions of raw records older than COSTPLATFORM_RETENTION_MONTHS (whole, never a "
        "DELETE) and delete rejections older than COSTPLATFORM_REJECTIONS_RETENTION_DAYS. Rollups and the "
        "ledger are kept. The beat job 'ingest-retention' runs the same every night."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="say what would go, change nothing")
        parser.add_argument("--months", type=int, help="keep this many months instead of the setting")

    def handle(self, *args: Any, dry_run: bool, months: int | None, **options: Any) -> None:
        now = timezone.now()
        months = settings.RETENTION_MONTHS if months is None else months
        horizon = retention_horizon(today=now.date(), months=months)
        if horizon is None:
            self.stdout.write("retention is off (0 months): no partition is dropped")
        else:
            self.stdout.write(f"keeping raw records from {horizon:%Y-%m} ({months} months before this one)")
        verb = "would drop" if dry_run else "dropped"
        dropped = partitions_drop_expired(today=now.date(), months=months, dry_run=dry_run)
        for drop in dropped:
            self.stdout.write(f"{verb} {drop.partition} ({drop.month:%Y-%m}, {drop.records} records)")
        rejections = rejections_delete_expired(now=now, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(
            f"{verb} {rejections} rejections; {len(dropped)} partitions, {sum(d.records for d in dropped)} records"
        )
