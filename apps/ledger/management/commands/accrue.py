from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.ledger.services.accrual import range_accrue


class Command(BaseCommand):
    help = (
        "Bring the journal of the months touching [--from, --to) in line with the priced rows "
        "(closed months get adjusting entries). Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", type=date.fromisoformat, required=True)
        parser.add_argument("--to", dest="end", type=date.fromisoformat, required=True, help="exclusive")
        parser.add_argument("--force", action="store_true", help="recompute days whose fingerprint is unchanged")

    def handle(self, *args: Any, start: date, end: date, force: bool, **options: Any) -> None:
        for result in range_accrue(start=start, end=end, force=force):
            self.stdout.write(
                f"{result.month:%Y-%m}: {result.days_computed} days computed, {result.days_skipped} unchanged, "
                f"{result.entries_written} entries written, {result.entries_removed} removed"
            )
