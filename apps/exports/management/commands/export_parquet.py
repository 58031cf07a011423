from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.buckets import BucketError, parse_month

MISSING = "the Parquet export needs pyarrow and boto3: pip install 'costplatform[warehouse]' ({error})"


class Command(BaseCommand):
    help = (
        "Write a month's priced rollups and journal lines as Parquet for warehouses: "
        "<to>/rollups/month=YYYY-MM/part-0.parquet and <to>/journal/month=YYYY-MM/part-0.parquet, "
        "replacing that month's files. <to> is a directory or s3://bucket/prefix (AWS_* credentials, "
        "COSTPLATFORM_S3_ENDPOINT_URL for an S3-compatible store)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM, an accounting month")
        parser.add_argument("--to", required=True, help="a directory, or s3://bucket/prefix")
        parser.add_argument("--batch-rows", type=int, default=50_000, help="rows per page and row group")

    def handle(self, *args: Any, month: str, to: str, batch_rows: int, **options: Any) -> None:
        try:
            from apps.exports.warehouse import ExportError, month_export
        except ImportError as exc:  # the optional extra is not installed
            raise CommandError(MISSING.format(error=exc)) from exc
        if batch_rows < 1:
            raise CommandError("--batch-rows must be at least 1")
        try:
            written = month_export(month=parse_month(month), to=to, batch_rows=batch_rows)
        except (BucketError, ExportError) as exc:
            raise CommandError(str(exc)) from exc
        for part in written:
            self.stdout.write(f"{part.dataset}: {part.rows} rows in {part.row_groups} row groups -> {part.location}")
