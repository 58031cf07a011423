"""System checks: the accounting time zone must be a known zone whose offset keeps its minutes
over the years (costplatform.E001), or the books cannot be built from the hour rollups, whose
hours start at the zone's minutes past each UTC hour (apps.common.buckets.hour_origin); and, a
database check (run by `migrate` and `manage.py check --database default`), the stored hour
rollups must lie on that zone's grid (costplatform.E002, apps.common.hourgrid)."""

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
            hint=(
                f"Set {SETTING} to an IANA zone whose offset keeps its minutes, e.g. Asia/Shanghai, "
                "Europe/Berlin, Asia/Kolkata, Australia/Adelaide, UTC."
            ),
            id="costplatform.E001",
        )
    ]


@checks.register(checks.Tags.database)
def hour_grid_check(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from apps.common.hourgrid import grid_problem

    if not databases or zone_problem(str(getattr(settings, "ACCOUNTING_TZ", "UTC"))) is not None:
        return []
    problem = grid_problem()
    return [] if problem is None else [checks.Error(problem, id="costplatform.E002")]
