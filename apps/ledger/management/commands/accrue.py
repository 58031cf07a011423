from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.dayrun import RunBusy
from apps.ledger.services.accrual import range_accrue


class Command(BaseCommand):
    help = (
        "Bring the journal of the months touching [--from, --to) in line with the priced rows "
        "(closed months get adjusting entries), a month per transaction. Idempotent and resumable: after a crash, "
        "the same command continues at the first month not done."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", type=date.fromisoformat, required=True)
        parser.add_argument("--to", dest="end", type=date.fromisoformat, required=True, help="exclusive")
        parser.add_argument("--force", action="store_true", help="recompute days whose fingerprint is unchanged")

    def handle(self, *args: Any, start: date, end: date, force: bool, **options: Any) -> None:
        try:
            results = range_accrue(start=start, end=end, force=force)
        except RunBusy as exc:
            raise CommandError(str(exc)) from exc
        for result in results:
            self.stdout.write(
                f"{result.month:%Y-%m}: {result.days_computed} days computed, {result.days_skipped} unchanged, "
                f"{result.entries_written} entries written, {result.entries_removed} removed"
            )
