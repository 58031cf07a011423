"""Writes of the idle policy and the reserved shares: validated (a closed month's settings do not
change) and saved row by row, so the audit log records each change."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import transaction

from apps.ledger.idle.models import IdlePolicy, ReservedShare


def idle_policy_set(*, month: date, policy: str, user: Any = None, note: str = "") -> IdlePolicy:
    """The idle policy from `month` on (until a later setting's month); the next accrual books the
    open months it applies to again (the change bumps the mapping's config version)."""
    with transaction.atomic():
        row = IdlePolicy.objects.select_for_update().filter(month=month).first() or IdlePolicy(month=month)
        row.policy, row.note, row.changed_by = policy, note, user
        row.full_clean()
        row.save()
    return row


def reserved_share_set(
    *, pool_id: int, business_line: str, month: date, percent: Decimal, user: Any = None, note: str = ""
) -> ReservedShare:
    """A line's reserved share of a pool from `month` on (0 ends it); a pool's shares add up to
    100 % at most in every month."""
    with transaction.atomic():
        found = ReservedShare.objects.select_for_update().filter(
            pool_id=pool_id, business_line=business_line, month=month
        )
        row = found.first() or ReservedShare(pool_id=pool_id, business_line=business_line, month=month)
        row.percent, row.note, row.changed_by = Decimal(percent), note, user
        row.full_clean()
        row.save()
    return row
