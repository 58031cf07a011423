from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.buckets import parse_month
from costplatform.demo_data import Plan, load, summary


class Command(BaseCommand):
    help = (
        "Load a generated month of token records (six business lines, waste patterns, a campaign window, "
        "a priced self-hosted pool) through the ingest service, then price it and accrue the ledger. "
        "Loading the same month, seed and size again adds nothing. See costplatform/demo_data.py."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--month", required=True, help="YYYY-MM (the current month stops at now)")
        parser.add_argument("--records", type=int, default=200_000, help="about this many records (default 200000)")
        parser.add_argument("--seed", type=int, default=11)

    def handle(self, *args: Any, month: str, records: int, seed: int, **options: Any) -> None:
        started = time.monotonic()
        try:
            plan = Plan(month=parse_month(month), records=records, seed=seed)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        loaded = load(plan, progress=self.stdout.write)
        self.stdout.write(
            f"loaded {loaded.records:,} records: {loaded.accepted:,} stored, {loaded.duplicates:,} already there, "
            f"{loaded.rejected:,} refused"
        )
        for name, count in loaded.workloads.items():
            self.stdout.write(f"  {count:>9,}  {name}")
        for note in loaded.notes:
            self.stdout.write(f"  {note}")
        self.stdout.write(f"the month now holds ({plan.month:%Y-%m}):")
        for line in summary(plan):
            self.stdout.write(line)
        laps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in loaded.seconds.items())
        self.stdout.write(f"done in {time.monotonic() - started:.1f} s ({laps})")
