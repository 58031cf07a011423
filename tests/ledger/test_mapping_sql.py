"""The mapping rules as the SQL expression the accrual, the drill-down, the finance page's waste and
FOCUS evaluate (apps.ledger.mapping): its exact text for each kind of condition, in priority
order, with its parameters beside it; and nothing but NULL when no usage rule is active."""

from __future__ import annotations

import json

import pytest

from apps.common.composed import text
from apps.ledger.mapping import mapping_load
from apps.ledger.models import MappingRule
from tests.ledger.helpers import account

pytestmark = pytest.mark.django_db


def test_each_kind_of_condition_in_priority_order() -> None:
    MappingRule.objects.update(active=False)
    dims = MappingRule.objects.create(priority=1, name="rag", dims={"feature": "rag"}, account=account("6401.02"))
    waste = MappingRule.objects.create(
        priority=2, name="waste", token_class="waste", elastic="outside", account=account("6401.04")
    )
    reason = MappingRule.objects.create(
        priority=3, name="retries", reason="waste.retry", elastic="inside", account=account("6401.03")
    )
    every = MappingRule.objects.create(priority=4, name="the rest", account=account("6401.01"))

    mapping = mapping_load()

    assert text(mapping.usage_sql) == (
        f"(CASE WHEN d.dims @> %s::jsonb THEN {dims.pk} "
        f"WHEN r.name LIKE %s AND w.window_id IS NULL THEN {waste.pk} "
        f"WHEN r.name = %s AND w.window_id IS NOT NULL THEN {reason.pk} "
        f"WHEN TRUE THEN {every.pk} END)::bigint"
    )
    assert mapping.usage_params == [json.dumps({"feature": "rag"}), "waste.%", "waste.retry"]


def test_no_active_usage_rule_books_everything_to_the_fallback() -> None:
    MappingRule.objects.update(active=False)
    mapping = mapping_load()
    assert text(mapping.usage_sql) == "NULL::bigint" and mapping.usage_params == []
