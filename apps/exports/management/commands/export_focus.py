from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.buckets import BucketError, parse_month
from apps.exports.focus_versions import DATASETS, DEFAULT_VERSION, VERSIONS, FocusChoiceError, focus_export


class Command(BaseCommand):
    help = (
        "Write a billing period as FOCUS CSV (the file GET /api/v1/exports/focus serves): FOCUS 1.4 "
        "by default, 1.2 with --focus-version 1.2; the cost and usage dataset, or with --dataset "
        "invoice-detail the month's supplier bills as FOCUS 1.4 Invoice Detail. To standard output "
        "unless --output names a file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM, the billing period")
        parser.add_argument("--focus-version", choices=VERSIONS, default=DEFAULT_VERSION)
        parser.add_argument("--dataset", choices=DATASETS, default=DATASETS[0])
        parser.add_argument("--output", default="", help="a file to write (default: standard output)")

    def handle(self, *args: Any, month: str, focus_version: str, dataset: str, output: str, **options: Any) -> None:
        try:
            chunks = focus_export(month=parse_month(month), version=focus_version, dataset=dataset)
        except (BucketError, FocusChoiceError) as exc:
            raise CommandError(str(exc)) from exc
        if not output:
            for chunk in chunks:
                sys.stdout.write(chunk)
            return
        with open(output, "w", encoding="utf-8", newline="") as file:
            for chunk in chunks:
                file.write(chunk)
        self.stderr.write(f"FOCUS {focus_version} {dataset} of {month} -> {output}")
