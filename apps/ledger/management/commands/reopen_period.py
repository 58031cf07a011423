from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.ledger.services.periods import PeriodError, parse_month, period_reopen


class Command(BaseCommand):
    help = "Reopen a closed month (admin only; the reason is recorded)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument("--user", required=True, help="an admin's username")
        parser.add_argument("--reason", required=True)

    def handle(self, *args: Any, month: str, user: str, reason: str, **options: Any) -> None:
        try:
            who = get_user_model().objects.get(username=user)
            period_reopen(month=parse_month(month), user=who, reason=reason)
        except (PeriodError, PermissionDenied, get_user_model().DoesNotExist) as exc:
            raise CommandError(str(exc) or "reopening a period needs the admin role") from exc
        self.stdout.write(self.style.SUCCESS(f"reopened {month}"))
