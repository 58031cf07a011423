from __future__ import annotations

import time
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.classification.models import RuleSet
from apps.classification.services import ReclassifyBusy, ReclassifyError, active_ruleset, reclassify_run

BAR = 30


class Command(BaseCommand):
    help = (
        "Reclassify the records of the days in [--from, --to) with the active rule set (or --ruleset VERSION): "
        "each day's class rollup is replaced in one transaction and its costs follow. Resumable: after a crash, "
        "the same command continues at the first day not done."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", type=date.fromisoformat, required=True, help="first day, UTC")
        parser.add_argument("--to", dest="end", type=date.fromisoformat, required=True, help="day after the last")
        parser.add_argument("--ruleset", type=int, help="rule set version (default: the active one)")

    def handle(self, *args: Any, start: date, end: date, ruleset: int | None, **options: Any) -> None:
        tty = self.stdout.isatty()
        began = time.monotonic()

        def progress(day: date, done: int, total: int) -> None:
            if tty:
                filled = BAR * done // total
                left = (time.monotonic() - began) / done * (total - done)
                bar = f"[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total} {day} ~{left:.0f} s left"
                self.stdout.write(f"\r{bar}", ending="")
                self.stdout.flush()
            else:
                self.stdout.write(f"reclassified {day} ({done}/{total})")

        try:
            chosen = RuleSet.objects.get(version=ruleset) if ruleset is not None else active_ruleset()
            run = reclassify_run(start=start, end=end, ruleset=chosen, progress=progress)
        except RuleSet.DoesNotExist as exc:
            raise CommandError(f"no rule set with version {ruleset}") from exc
        except (ReclassifyError, ReclassifyBusy) as exc:
            raise CommandError(str(exc)) from exc
        if tty:
            self.stdout.write("")
        self.stdout.write(
            self.style.SUCCESS(
                f"reclassified {run.start} .. {run.end} (exclusive) with rule set v{chosen.version} "
                f"in {time.monotonic() - began:.1f} s"
            )
        )
