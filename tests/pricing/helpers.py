"""Reading back what pricing wrote."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from apps.pricing.models import HourlyCost

DAY1 = datetime(2025, 3, 10, tzinfo=UTC)


def at(hour: int, day: datetime = DAY1) -> datetime:
    return day.replace(hour=hour)


def costs(**filters: Any) -> list[tuple[datetime, str, str, int, Decimal, str, int | None, int | None]]:
    """Cost rows as (hour, model, component, tokens, cost, currency, version id, pool id), in key order."""
    rows = (
        HourlyCost.objects.filter(**filters)
        .select_related("model")
        .order_by("hour", "source_id", "model_id", "dims_id", "reason_id", "component")
    )
    return [
        (r.hour, r.model.name, r.get_component_display(), r.tokens, r.cost, r.currency, r.price_version_id, r.pool_id)
        for r in rows
    ]
