"""Audit thresholds: each can be overridden in Django settings; the defaults follow the seeds
(000 §5.2, 001 §4) and are meant to name what is worth cutting, not every oddity."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # A finding below this many tokens to save is not worth a line (model mismatch: tokens moved).
    "AUDIT_MIN_TOKENS": 10_000,
    # Zombie: active in this share of the month's hours, hourly tokens with a coefficient of
    # variation at most this, and the busiest 12 hours of the day at most this many times the
    # quietest 12 (interactive traffic follows the day; a forgotten job does not).
    "AUDIT_ZOMBIE_ACTIVE_SHARE": Decimal("0.90"),
    "AUDIT_ZOMBIE_CV_MAX": Decimal("0.50"),
    "AUDIT_ZOMBIE_DIURNAL_MAX": Decimal("1.50"),
    # Duplicates: requests repeating a prompt hash (in other conversations) within the month.
    "AUDIT_DUPLICATE_MIN_REPEATS": 20,
    # Loops: a conversation with at least this many calls, this share of them repeating a prompt hash.
    "AUDIT_LOOP_MIN_CALLS": 15,
    "AUDIT_LOOP_MIN_REPEAT_SHARE": Decimal("0.30"),
    # Retry storm: an hour of one workload with at least this many retries, this share of its requests.
    "AUDIT_RETRY_MIN_PER_HOUR": 20,
    "AUDIT_RETRY_MIN_SHARE": Decimal("0.20"),
    # Model mismatch: this share of a large model's requests fit the configured small model.
    "AUDIT_MISMATCH_MIN_SHARE": Decimal("0.30"),
    "AUDIT_MISMATCH_MIN_REQUESTS": 100,
    # System prompt: system tokens at least this share of prompt tokens.
    "AUDIT_SYSTEM_SHARE_MIN": Decimal("0.30"),
    # Context bloat: tool/context at least this share of prompt tokens, and tool tokens per
    # request in the month's last week this many times the first week's.
    "AUDIT_CONTEXT_TOOL_SHARE_MIN": Decimal("0.30"),
    "AUDIT_CONTEXT_GROWTH_MIN": Decimal("1.50"),
    "AUDIT_CONTEXT_MIN_WEEK_REQUESTS": 20,
    # Chat summaries list money only when set (the report page shows it to finance and admin only).
    "AUDIT_BROADCAST_MONEY": False,
    # Severity of the summaries: channels take "warning" and up unless set lower.
    "AUDIT_BROADCAST_SEVERITY": "warning",
}


def get(name: str) -> Any:
    value = getattr(settings, name, DEFAULTS[name])
    # Shares and factors are compared with Decimal figures: accept 0.3 or "0.3" from settings.
    return Decimal(str(value)) if isinstance(DEFAULTS[name], Decimal) else value
