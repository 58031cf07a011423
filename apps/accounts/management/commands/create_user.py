from __future__ import annotations

import getpass
import sys
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import ROLES
from apps.accounts.services import UnknownBusinessLines, user_create


class Command(BaseCommand):
    help = (
        "Create a person with a role and the business lines they see (none given: all lines), in one step. "
        "The password is asked for; with --generate-password (or no terminal) one is generated and printed once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES, help="What the person may open and change.")
        parser.add_argument(
            "--line",
            action="append",
            default=[],
            dest="lines",
            metavar="LINE",
            help="A business line the person sees (repeat for several); none given = every line.",
        )
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--new-line",
            action="store_true",
            help="Confirm lines the platform does not know yet (no record, cost centre, budget or key has them).",
        )
        parser.add_argument(
            "--generate-password", action="store_true", help="Do not ask: generate one and print it once."
        )

    def handle(self, *args: Any, username: str, role: str, lines: list[str], **options: Any) -> None:
        if User.objects.filter(username=username).exists():
            raise CommandError(f"A user named {username!r} already exists.")
        asks = not options["generate_password"] and sys.stdin.isatty()
        password = self.ask_password(username) if asks else None
        try:
            made = user_create(
                username=username,
                role=role,
                business_lines=lines,
                email=options["email"],
                password=password,
                new_lines=options["new_line"],
            )
        except UnknownBusinessLines as refused:
            raise CommandError(f"{refused} (--new-line confirms)") from refused
        seen = ", ".join(sorted(set(lines))) if lines else "every business line"
        self.stderr.write(f"Created {username!r}: role {role}, sees {seen}.")
        if password is None:
            self.stderr.write("Its password, shown this once:")
            self.stdout.write(made.password)

    def ask_password(self, username: str) -> str:
        for _ in range(3):
            password = getpass.getpass(f"Password for {username}: ")
            if password != getpass.getpass("Again: "):
                self.stderr.write("They differ; once more.")
                continue
            try:
                validate_password(password, User(username=username))
            except ValidationError as weak:
                self.stderr.write(" ".join(weak.messages))
                continue
            return password
        raise CommandError("No password set.")
