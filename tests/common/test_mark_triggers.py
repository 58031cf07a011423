"""The mark triggers in the database are the ones their consumers declare (apps.common.rollup.
MarkTrigger): each function's body as the declaration generates it, each trigger as it creates
it, and no other trigger that marks a transition table `changed`. A declaration changed without
a migration installing it (or a trigger changed by hand) fails here."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.common.rollup import MarkTrigger
from apps.dashboards.rollup import STALE_TRIGGER
from apps.ledger.services.accrual import DIRTY_TRIGGER as LEDGER_TRIGGER
from apps.pricing.services import DIRTY_TRIGGER as PRICING_TRIGGER

DECLARED = (PRICING_TRIGGER, LEDGER_TRIGGER, STALE_TRIGGER)
# The statement-level triggers of the schema that read a transition table named `changed`.
_INSTALLED = """
SELECT pg_get_triggerdef(g.oid), g.tgenabled FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
WHERE NOT g.tgisinternal AND c.relnamespace = current_schema()::regnamespace
  AND 'changed' IN (g.tgnewtable, g.tgoldtable)
ORDER BY 1
"""


def _installed() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        (schema,) = cursor.fetchone()
        cursor.execute(_INSTALLED)
        return [(d.replace(f" ON {schema}.", " ON "), enabled) for d, enabled in cursor.fetchall()]


@pytest.mark.django_db
@pytest.mark.parametrize("trigger", DECLARED, ids=lambda t: t.function)
def test_the_installed_function_is_the_one_its_declaration_generates(trigger: MarkTrigger) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT prosrc, pg_get_functiondef(oid) FROM pg_proc "
            "WHERE proname = %s AND pronamespace = current_schema()::regnamespace",
            [trigger.function],
        )
        [(body, definition)] = cursor.fetchall()
    assert body == trigger.body()
    assert "LANGUAGE plpgsql" in definition and "RETURNS trigger" in definition


@pytest.mark.django_db
def test_the_installed_triggers_are_the_declared_ones_firing_by_origin() -> None:
    # None is on a ledger table (whose triggers fire always): each fires as the tables' writers do.
    declared = sorted((statement, "O") for trigger in DECLARED for statement in trigger.triggers())
    assert _installed() == declared
    assert not any(table.startswith("ledger_") for trigger in DECLARED for table in trigger.on)
