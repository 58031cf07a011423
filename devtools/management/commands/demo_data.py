from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.buckets import parse_month
from devtools.demo_data import Loaded, Plan, demo_build, load, plan_for, summary


class Command(BaseCommand):
    help = (
        "Load generated token records (six business lines, waste patterns, a campaign window, a priced "
        "self-hosted pool) through the ingest service, price them and accrue the ledger. Without --month: "
        "the previous month of the accounting zone, with budgets and revenue, closed with an approved close "
        "request (its findings stored), and the current month so far, open. Loading again adds nothing and "
        "leaves a closed month as it is. See devtools/demo_data.py."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--month", help="YYYY-MM: load this month alone, left open (the current one stops at now)")
        parser.add_argument(
            "--records", type=int, default=200_000,
            help="about this many records per whole month; a month in progress gets its share (default 200000)",
        )  # fmt: skip
        parser.add_argument("--seed", type=int, default=11)

    def handle(self, *args: Any, month: str | None, records: int, seed: int, **options: Any) -> None:
        started = time.monotonic()
        if month is None:
            for built in demo_build(records=records, seed=seed, progress=self.stdout.write):
                self.stdout.write(f"{built.month:%Y-%m}: {built.status}")
                if built.loaded is not None:
                    self.report(plan_for(month=built.month, records=records, seed=seed), built.loaded)
                for note in built.notes:
                    self.stdout.write(f"  {note}")
        else:
            try:
                plan = plan_for(month=parse_month(month), records=records, seed=seed)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            self.report(plan, load(plan, progress=self.stdout.write))
        self.stdout.write(f"done in {time.monotonic() - started:.1f} s")

    def report(self, plan: Plan, loaded: Loaded) -> None:
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
        self.stdout.write(f"  ({laps})")
