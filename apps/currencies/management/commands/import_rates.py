from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.csvcells import csv_text
from apps.currencies.rates import COLUMNS, RateError, functional_currency, rates_import


class Command(BaseCommand):
    help = (
        f"Import exchange rates from a CSV with the columns {','.join(COLUMNS)} (and optionally `to`, "
        "the functional currency by default): one row per accounting day and currency, the rate in "
        "units of the functional currency per one unit. All or nothing: a file with a bad row is "
        "refused, each bad row named with its reason. A rate already there is replaced (audit-logged); "
        "the next accrual books the days at the new rates."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "file", type=Path, help="the rates as CSV (UTF-8, or GB18030 as Excel saves it on Chinese Windows)"
        )

    def handle(self, *args: Any, file: Path, **options: Any) -> None:
        try:
            text = csv_text(file.read_bytes())
            if text is None:
                raise CommandError(f"{file}: neither UTF-8 nor GB18030 text; nothing was imported")
            saved = rates_import(text=text)
        except RateError as exc:
            for error in exc.errors:
                self.stderr.write(error)
            raise CommandError(f"refused: {len(exc.errors)} errors; nothing was imported") from exc
        except OSError as exc:
            raise CommandError(str(exc)) from exc
        days = sorted({r.day for r in saved})
        span = f" ({days[0]} .. {days[-1]})" if days else ""
        self.stdout.write(f"imported {len(saved)} rates into {functional_currency()}{span}")
