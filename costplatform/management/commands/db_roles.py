"""`manage.py db_roles`: set up the app's DML-only runtime role, as the owner."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from costplatform.dbroles import RoleError, migration_alias, runtime_role_configured, runtime_role_setup


class Command(BaseCommand):
    help = (
        "As the owner (DATABASE_OWNER_URL), create the runtime role if missing (with DATABASE_URL's password "
        "when it is DATABASE_URL's role), refuse one with powers (superuser, createdb, createrole, replication, "
        "bypassrls, membership of the owner), and grant it SELECT, INSERT, UPDATE, DELETE on every table of the "
        "schema, now and later, EXECUTE on the partition functions, and nothing else (no TRUNCATE, no DDL). "
        "`manage.py migrate` does the same after migrating when DATABASE_OWNER_URL is set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runtime-role", default="", help="the role to set up (default: the user of DATABASE_URL)")

    def handle(self, *args: Any, **options: Any) -> None:
        role = options["runtime_role"] or runtime_role_configured()
        if not role:
            raise CommandError(
                "nothing to set up: DATABASE_OWNER_URL is not set (or names DATABASE_URL's role), so the app runs "
                "as the owner; set DATABASE_OWNER_URL, or name a role with --runtime-role"
            )
        default = settings.DATABASES["default"]
        password = str(default["PASSWORD"]) if role == default["USER"] else ""
        try:
            done = runtime_role_setup(role=role, password=password, alias=migration_alias())
        except RoleError as exc:
            raise CommandError(str(exc)) from exc
        for line in done:
            self.stdout.write(line)
