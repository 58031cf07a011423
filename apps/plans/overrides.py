"""Temporary overrides of hard budgets: finance lets a spent line (team, caller) be served until a
time, with a reason. Each grant is a row of its own (audit-logged by apps/auditlog), so the
log shows who let which line run past its budget, why, and until when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from apps.common.buckets import month_end
from apps.plans.models import Budget, BudgetOverride

OVERRIDE_NO_REASON = "an override needs a reason"
OVERRIDE_PAST = "an override must last until a time after now"
OVERRIDE_TOO_LONG = "an override ends at the latest when the budget's month ends ({end:%Y-%m-%d %H:%M} UTC)"


class OverrideError(ValueError):
    """An override that cannot be granted; the message says why."""


def budget_override_grant(*, budget: Budget, until: datetime, reason: str, user: Any, now: datetime) -> BudgetOverride:
    """Let `budget`'s scope (line, team, caller) be served until `until`, whatever it has used."""
    reason = reason.strip()
    if not reason:
        raise OverrideError(OVERRIDE_NO_REASON)
    if until <= now:
        raise OverrideError(OVERRIDE_PAST)
    end = month_end(budget.month)
    if until > end:
        raise OverrideError(OVERRIDE_TOO_LONG.format(end=end))
    with transaction.atomic():
        return BudgetOverride.objects.create(budget=budget, until=until, reason=reason, granted_by=user)
