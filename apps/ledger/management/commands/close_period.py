from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.ledger.services.periods import PeriodError, parse_month, period_close


class Command(BaseCommand):
    help = (
        "Close a month: complete its journal, run the month-end checks (stored as findings) and lock it. "
        "Later changes to its days become adjusting entries in the next open month."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument("--user", help="username recorded as closing it")

    def handle(self, *args: Any, month: str, user: str | None = None, **options: Any) -> None:
        began = time.monotonic()
        try:
            who = get_user_model().objects.get(username=user) if user else None
            result = period_close(month=parse_month(month), user=who)
        except (PeriodError, get_user_model().DoesNotExist) as exc:
            raise CommandError(str(exc)) from exc
        accrual = result.accrual
        self.stdout.write(
            f"journal: {accrual.days_computed} days computed, {accrual.days_skipped} unchanged, "
            f"{accrual.entries_written} entries written"
        )
        for total in result.totals:
            self.stdout.write(
                f"{total.currency}: debits {total.debits} = credits {total.credits}; "
                f"booked {total.booked}, priced {total.priced}"
            )
        for finding in result.findings:
            self.stdout.write(self.style.WARNING(f"{finding.kind}: {finding.message}"))
        self.stdout.write(self.style.SUCCESS(f"closed {month} in {time.monotonic() - began:.1f} s"))
