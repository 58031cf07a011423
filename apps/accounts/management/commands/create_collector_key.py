from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import CollectorKey
from apps.accounts.services import collector_key_create


class Command(BaseCommand):
    help = "Create a collector key (a record source) and print its secret once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="Unique name of the source, e.g. vllm-prod-1.")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        if CollectorKey.objects.filter(name=name).exists():
            raise CommandError(f"A collector key named {name!r} already exists.")
        created = collector_key_create(name=name)
        self.stderr.write(f"Created collector key {name!r}. Store the secret now; it is not shown again.")
        self.stdout.write(created.secret)
