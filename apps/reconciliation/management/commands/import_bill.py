from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.ledger.services.periods import PeriodError, parse_month
from apps.reconciliation.imports import BillImportError, bill_import
from apps.reconciliation.matching import supplier_reconcile
from apps.reconciliation.models import Supplier


class Command(BaseCommand):
    help = (
        "Import a supplier's bill of a month (a CSV read through the supplier's column mapping) and "
        "match it against the platform. All or nothing: a file with a bad row is refused, each bad row "
        "kept with its reason, and the month's bill stays as it was. Re-importing replaces the month's "
        "bill; a closed month's bill is refused."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("supplier", help="the supplier's name (admin: Ledger > Suppliers)")
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument("file", type=Path, help="the bill as CSV")

    def handle(self, *args: Any, supplier: str, month: str, file: Path, **options: Any) -> None:
        try:
            found = Supplier.objects.select_related("pool").get(name=supplier)
            first = parse_month(month)
            result = bill_import(supplier=found, month=first, content=file.read_bytes(), filename=file.name)
        except Supplier.DoesNotExist as exc:
            names = ", ".join(Supplier.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no supplier {supplier!r} (suppliers: {names})") from exc
        except (BillImportError, PeriodError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        if not result.accepted:
            for error in result.errors:
                self.stderr.write(f"line {error.row}: {error.reason}")
            raise CommandError(f"refused: {result.refused_rows} bad rows; nothing was imported")
        bill = result.bill
        replaced = " (replacing the earlier import)" if result.replaced else ""
        self.stdout.write(f"imported {bill.rows} rows, {bill.total} {bill.currency}{replaced}")
        found_now = supplier_reconcile(supplier=found, month=first)
        for diff in found_now.open:
            self.stdout.write(
                f"{diff.day} {diff.model} {diff.key or '-'} {diff.kind}: bill {diff.bill_amount} "
                f"platform {diff.platform_amount} difference {diff.amount_diff}; tokens {diff.bill_tokens} "
                f"vs {diff.platform_tokens}"
            )
        state = "reconciled" if found_now.reconciled else f"unreconciled {found_now.unreconciled} {found.currency}"
        self.stdout.write(self.style.SUCCESS(f"{found.name} {month}: {len(found_now.open)} open differences, {state}"))
