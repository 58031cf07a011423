"""`manage.py migrate` as the owner: with DATABASE_OWNER_URL set, everything the migrations do
(data migrations and post-migrate signals included, which use the default connection) runs on
the owner's connection; then the runtime role (DATABASE_URL's) is granted its DML on whatever
the migrations made (costplatform/dbroles.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import DEFAULT_DB_ALIAS, connections

from costplatform.dbroles import OWNER_ALIAS, runtime_role_configured, runtime_role_setup


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " With DATABASE_OWNER_URL set: as the owner, then `db_roles` for DATABASE_URL's role."

    def execute(self, *args: Any, **options: Any) -> str | None:
        # The swap covers the system checks too, which connect before handle() runs.
        if OWNER_ALIAS not in settings.DATABASES or options.get("database", DEFAULT_DB_ALIAS) != DEFAULT_DB_ALIAS:
            return super().execute(*args, **options)
        runtime = connections[DEFAULT_DB_ALIAS]
        connections[DEFAULT_DB_ALIAS] = connections[OWNER_ALIAS]
        try:
            output = super().execute(*args, **options)
        finally:
            connections[DEFAULT_DB_ALIAS] = runtime
        role = runtime_role_configured()
        if role:
            for line in runtime_role_setup(role=role, password=str(settings.DATABASES[DEFAULT_DB_ALIAS]["PASSWORD"])):
                if options.get("verbosity", 1) >= 1:
                    self.stdout.write(line)
        return output
