"""Which models the audit log records: each app names its own, from its `AppConfig.ready()`
(`audited(RuleSet, Rule)`), so the log, below every app, names none of them. A registered model's
saves and deletes write an AuditEntry in the same transaction (receivers.py)."""

from __future__ import annotations

from django.db import models

from apps.auditlog.receivers import receivers_connect

_audited: dict[str, type[models.Model]] = {}


def audited(*registered: type[models.Model]) -> None:
    """Record every change of these models in the audit log (once each, however often called)."""
    for model in registered:
        _audited[model._meta.label] = model
        receivers_connect(model)


def audited_models() -> list[type[models.Model]]:
    """The audited models, by label."""
    return [_audited[label] for label in sorted(_audited)]
