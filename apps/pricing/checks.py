"""System checks: models with tokens but no price or pool (pricing.W001)."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError

from apps.pricing.selectors import unpriced_message, unpriced_models_recent


@checks.register()
def unpriced_models_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if app_configs is not None and not any(c.label == "pricing" for c in app_configs):
        return []
    try:
        models = unpriced_models_recent()
    except (DatabaseError, RuntimeError):
        return []  # no database yet (before migrate) or none allowed (tests): nothing to say
    if not models:
        return []
    return [
        checks.Warning(
            unpriced_message(models),
            hint="Add prices (admin: Price versions, or manage.py set_price) or a cost pool, then run "
            "manage.py reprice over the hours listed.",
            id="pricing.W001",
        )
    ]
