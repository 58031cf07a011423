from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import DEFAULT_BACKDATE_DAYS, CollectorKey
from apps.accounts.services import collector_key_create


class Command(BaseCommand):
    help = (
        "Create a collector key (a record source) and print its secret once. By default the key may "
        f"write every business line, sends no reconciliation records and backdates {DEFAULT_BACKDATE_DAYS} "
        "days; the options below, or the admin later, change that."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="Unique name of the source, e.g. vllm-prod-1.")
        parser.add_argument(
            "--business-line",
            action="append",
            default=[],
            dest="business_lines",
            metavar="LINE",
            help="A business line the key may write (repeat for several); none given = all lines.",
        )
        parser.add_argument(
            "--reconciliation",
            action="store_true",
            help="Allow reconciliation records (the vLLM /metrics reconciler sends them).",
        )
        parser.add_argument(
            "--backdate-days",
            type=int,
            default=DEFAULT_BACKDATE_DAYS,
            metavar="N",
            help=f"Refuse records older than N days (default {DEFAULT_BACKDATE_DAYS}).",
        )
        parser.add_argument(
            "--backfill",
            action="store_true",
            help="Accept records of any age the platform keeps, to load history.",
        )

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        if CollectorKey.objects.filter(name=name).exists():
            raise CommandError(f"A collector key named {name!r} already exists.")
        if options["backdate_days"] < 0:
            raise CommandError("--backdate-days must be 0 or more.")
        created = collector_key_create(
            name=name,
            business_lines=options["business_lines"],
            reconciliation=options["reconciliation"],
            backdate_days=options["backdate_days"],
            backfill=options["backfill"],
        )
        self.stderr.write(f"Created collector key {name!r}. Store the secret now; it is not shown again.")
        self.stdout.write(created.secret)
