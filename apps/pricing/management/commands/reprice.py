from __future__ import annotations

import time
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.pricing.services import PricingError, RepriceBusy, reprice_run

BAR = 30


class Command(BaseCommand):
    help = (
        "Recompute costs of the days in [--from, --to) from the classified tokens and the current price book. "
        "Resumable: after a crash, the same command continues at the first day not done."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", type=date.fromisoformat, required=True, help="first day, UTC")
        parser.add_argument("--to", dest="end", type=date.fromisoformat, required=True, help="day after the last")

    def handle(self, *args: Any, start: date, end: date, **options: Any) -> None:
        tty = self.stdout.isatty()
        began = time.monotonic()

        def progress(day: date, done: int, total: int) -> None:
            if tty:
                filled = BAR * done // total
                self.stdout.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total} {day}", ending="")
                self.stdout.flush()
            else:
                self.stdout.write(f"priced {day} ({done}/{total})")

        try:
            run = reprice_run(start=start, end=end, progress=progress)
        except (PricingError, RepriceBusy) as exc:
            raise CommandError(str(exc)) from exc
        if tty:
            self.stdout.write("")
        self.stdout.write(
            self.style.SUCCESS(f"repriced {run.start} .. {run.end} (exclusive) in {time.monotonic() - began:.1f} s")
        )
