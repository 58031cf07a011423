"""The ledger's models that moved to apps of their own (issue 33: reconciliation, currencies,
plans) kept their tables: a database migrated before the move keeps its rows, read back through
the new app's models, and each model's content type follows it, so its permissions and the role
groups' grants survive. The moves are state-only migrations (SeparateDatabaseAndState)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# Each app that took models from the ledger, and the models it took (lower case, as content types
# name them); BEFORE: the ledger's last migration before the first move.
MOVED = {
    "reconciliation": ("supplier", "bill", "billline", "billrowerror", "billadjustment"),
    "currencies": ("exchangerate", "missingrate"),
    "plans": ("budget", "revenue", "budgetoverride"),
}
BEFORE = ("ledger", "0014_dayreading")


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a new loader: the graph as now applied


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_after_it() -> None:
    executor = _migrate([*((app, None) for app in MOVED), BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    supplier = old.get_model("ledger", "Supplier").objects.create(name="moved-supplier", currency="USD")
    budget = old.get_model("ledger", "Budget").objects.create(
        business_line="moved-line", month=date(2026, 3, 1), currency="CNY", amount=Decimal("1200.00")
    )
    rate = old.get_model("ledger", "ExchangeRate").objects.create(
        day=date(2026, 3, 2), currency="USD", to="CNY", rate=Decimal("7.1234"), source="central parity"
    )
    # A permission of a moved model, granted to a group, as the roles' sync leaves it.
    content_type, _ = ContentType.objects.get_or_create(app_label="ledger", model="supplier")
    permission, _ = Permission.objects.get_or_create(
        content_type=content_type, codename="change_supplier", defaults={"name": "Can change supplier"}
    )
    group = Group.objects.create(name="moved-grants")
    group.permissions.add(permission)

    executor = _migrate(executor.loader.graph.leaf_nodes())

    from apps.currencies.models import ExchangeRate
    from apps.plans.models import Budget
    from apps.reconciliation.models import Supplier

    kept = Supplier.objects.get(pk=supplier.pk)
    assert (kept.name, kept.currency) == ("moved-supplier", "USD")
    assert (Supplier._meta.db_table, ExchangeRate._meta.db_table) == ("ledger_supplier", "ledger_exchangerate")
    assert ExchangeRate.objects.get(pk=rate.pk).rate == Decimal("7.1234")
    assert Budget.objects.get(pk=budget.pk).amount == Decimal("1200.00")
    content_type.refresh_from_db()
    assert content_type.app_label == "reconciliation"
    assert group.permissions.filter(content_type__app_label="reconciliation", codename="change_supplier").exists()
    for app, models in MOVED.items():
        assert not ContentType.objects.filter(app_label="ledger", model__in=models).exists(), app


@pytest.mark.django_db(transaction=True)
def test_the_moves_run_back_and_forth_and_leave_the_books_alone() -> None:
    """The test database is migrated from zero; from there down to before the moves and up
    again, the state-only steps run both ways and the books' rows stay."""
    from apps.ledger.models import Period

    Period.objects.create(month=date(2026, 1, 1))
    executor = _migrate([*((app, None) for app in MOVED), BEFORE])
    _migrate(executor.loader.graph.leaf_nodes())
    assert Period.objects.filter(month=date(2026, 1, 1)).exists()
