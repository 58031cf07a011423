from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_revoke


class Command(BaseCommand):
    help = "Revoke a collector key: its records stay, new requests with it get 401."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        try:
            key = collector_key_revoke(name=name)
        except CollectorKey.DoesNotExist as exc:
            raise CommandError(f"No collector key named {name!r}.") from exc
        self.stdout.write(f"Revoked {key.name} at {key.revoked_at:%Y-%m-%d %H:%M:%S} UTC.")
