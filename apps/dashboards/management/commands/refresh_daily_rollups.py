from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.dashboards.rollup import refresh_stale


class Command(BaseCommand):
    help = (
        "Rebuild the dashboards' daily rollups of every day with a changed hour that has ended (the beat job "
        "dashboards-refresh-daily-rollups does this every minute)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: all)")

    def handle(self, *args: Any, **options: Any) -> None:
        done = refresh_stale(seconds=options["seconds"])
        self.stdout.write(f"rebuilt {len(done)} day(s)" + (f": {done[0]} .. {done[-1]}" if done else ""))
