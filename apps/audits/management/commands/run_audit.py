from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audits.selectors import report_findings
from apps.audits.services import audit_run, report_broadcast
from apps.common.buckets import BucketError, parse_month
from apps.ingest.retention import RecordsGone


class Command(BaseCommand):
    help = "Audit a month's token use (zombies, duplicates, loops, ...), replacing that month's report."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument("--broadcast", action="store_true", help="also send the summary to the channels")

    def handle(self, *args: Any, month: str, broadcast: bool = False, **options: Any) -> None:
        began = time.monotonic()
        try:
            report = audit_run(month=parse_month(month))
        except (BucketError, RecordsGone) as exc:
            raise CommandError(str(exc)) from exc
        for finding in report_findings(report=report):
            money = "" if finding.savings is None else f", {finding.savings:.2f} {report.currency}"
            self.stdout.write(f"{finding.kind}: {finding.title} ({finding.savings_tokens:,} tokens{money})")
        money = "" if report.savings is None else f", {report.savings:.2f} {report.currency}"
        self.stdout.write(
            self.style.SUCCESS(
                f"audited {month} in {time.monotonic() - began:.1f} s: {report.findings.count()} findings, "
                f"estimated savings {report.savings_tokens:,} tokens{money}"
            )
        )
        if broadcast:
            self.stdout.write(f"{report_broadcast(report_id=report.pk)} summaries sent to the channels")
