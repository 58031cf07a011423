"""Ledger settings: each can be overridden in Django settings (or the environment, through
settings.py); the defaults are the brief's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Cost centre of usage whose dims carry no business line, and of pool idle capacity.
    "LEDGER_UNASSIGNED": "unassigned",
    "LEDGER_IDLE_COST_CENTRE": "unassigned",
    # Account of priced rows that no mapping rule matches (the seeded rules match everything).
    "LEDGER_FALLBACK_ACCOUNT": "6401.01",
    # recent_accrue looks at the months holding the last few days and every open month this recent.
    "LEDGER_RECENT_DAYS": 3,
    "LEDGER_OPEN_LOOKBACK_DAYS": 62,
    # Month-end checks (seed 003); the effective ratio's threshold is the health thresholds table's.
    "LEDGER_ELASTIC_REVENUE_MAX": Decimal("0.03"),
    "LEDGER_STRUCTURAL_ZERO_MONTHS": 2,
    # FOCUS export identity.
    "LEDGER_FOCUS_PROVIDER": "costplatform",
    "LEDGER_FOCUS_PUBLISHER": "self-hosted",
    "LEDGER_FOCUS_INVOICE_ISSUER": "internal recharge",
    "LEDGER_FOCUS_BILLING_ACCOUNT_ID": "costplatform",
    "LEDGER_FOCUS_BILLING_ACCOUNT_NAME": "LLM token expense",
    "LEDGER_FOCUS_SERVICE_NAME": "LLM inference",
}


def get(name: str) -> Any:
    return getattr(settings, name, DEFAULTS[name])
