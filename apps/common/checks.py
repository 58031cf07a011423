"""System checks: the accounting time zone must be a known zone with whole-hour offsets
(costplatform.E001), or the books cannot be built from the UTC-hour rollups."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from apps.common.buckets import SETTING, zone_problem


@checks.register()
def accounting_zone_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problem = zone_problem(str(getattr(settings, "ACCOUNTING_TZ", "UTC")))
    if problem is None:
        return []
    return [
        checks.Error(
            problem,
            hint=f"Set {SETTING} to an IANA zone whose offset is whole hours, e.g. Asia/Shanghai, Europe/Berlin, UTC.",
            id="costplatform.E001",
        )
    ]
