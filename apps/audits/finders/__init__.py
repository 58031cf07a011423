"""Audit finders: one function per finding kind, registered in FINDERS (see base.py)."""

from __future__ import annotations

from apps.audits.finders import records, rollups  # noqa: F401  (they register the finders)
from apps.audits.finders.base import FINDERS, AuditWindow, Draft, Rates, Tokens

__all__ = ["FINDERS", "AuditWindow", "Draft", "Rates", "Tokens"]
