"""The ledger's commands, Celery tasks and admin actions."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from apps.ledger import tasks
from apps.ledger.models import JournalEntry, Period, PeriodEvent
from apps.ledger.services.periods import period_close
from tests import factories
from tests.ledger.helpers import DAY1, SEP, at, spend

pytestmark = pytest.mark.django_db


def _staff(role: str) -> Client:
    user = factories.finance_user(f"staff-{role}", role=role)
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    return browser


def test_it_accrues_a_range_from_the_command_line_and_the_task() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")

    call_command("accrue", "--from", "2026-09-01", "--to", "2026-10-01")
    tasks.range_accrue.run("2026-09-01", "2026-10-01", force=True)

    assert spend() == {("6401.01", "customer-service"): Decimal("1.00")}
    assert JournalEntry.objects.count() == 1


def test_it_closes_from_the_task() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")

    tasks.period_close.run("2026-09")

    assert Period.objects.get(month=SEP).status == "closed"


def test_it_reopens_from_the_command_line_for_admins_only() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")
    period_close(month=SEP, now=datetime(2026, 10, 2, tzinfo=UTC))
    factories.finance_user("fin")
    factories.finance_user("root", role="admin")

    with pytest.raises(CommandError, match="admin"):
        call_command("reopen_period", "2026-09", "--user", "fin", "--reason", "x")
    call_command("reopen_period", "2026-09", "--user", "root", "--reason", "vendor credit note")

    assert Period.objects.get(month=SEP).status == "open"
    assert PeriodEvent.objects.get(action="reopen").note == "vendor credit note"


def test_it_closes_from_the_admin_for_finance_and_reopens_only_for_admins() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")
    Period.objects.create(month=SEP)
    url = "/admin/ledger/period/"
    pk = Period.objects.get(month=SEP).pk

    _staff("finance").post(url, {"action": "close", "_selected_action": [pk]})
    assert Period.objects.get(month=SEP).status == "closed"

    _staff("engineer").post(url, {"action": "reopen", "_selected_action": [pk]})
    assert Period.objects.get(month=SEP).status == "closed"
    _staff("admin").post(url, {"action": "reopen", "_selected_action": [pk]})
    assert Period.objects.get(month=SEP).status == "open"


def test_it_shows_the_journal_read_only_in_the_admin() -> None:
    factories.hourly_cost(hour=at(DAY1), cost="1.00")
    tasks.range_accrue.run("2026-09-01", "2026-10-01")
    entry = JournalEntry.objects.get()
    browser = _staff("admin")

    assert browser.get(f"/admin/ledger/journalentry/{entry.pk}/change/").status_code == 200
    assert browser.post(f"/admin/ledger/journalentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert JournalEntry.objects.filter(pk=entry.pk).exists()
