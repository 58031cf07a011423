"""Model signals of every audited model (each registered by its own app, `registry.audited`)
write an AuditEntry in the same transaction as the change. Changes made with QuerySet.update() or
bulk_create() send no signals: the services behind audited models save row by row (the admin's
bulk actions included)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.signals import post_delete, post_save, pre_save

from apps.auditlog.models import AuditEntry
from apps.auditlog.services import audit_entry_record, snapshot


def _stored(instance: models.Model) -> models.Model | None:
    if instance.pk is None:
        return None
    return type(instance)._base_manager.filter(pk=instance.pk).first()


def _before_save(sender: type[models.Model], instance: models.Model, raw: bool = False, **kwargs: Any) -> None:
    stored = None if raw or instance._state.adding else _stored(instance)
    instance._auditlog_before = snapshot(stored) if stored is not None else None  # type: ignore[attr-defined]


def _after_save(
    sender: type[models.Model], instance: models.Model, created: bool, raw: bool = False, **kwargs: Any
) -> None:
    if raw:  # loaddata
        return
    # Read back: database defaults and triggers (a mapping rule's revision) are part of "after".
    stored = _stored(instance) or instance
    before = getattr(instance, "_auditlog_before", None)
    action = AuditEntry.Action.CREATE if created or before is None else AuditEntry.Action.UPDATE
    audit_entry_record(instance=instance, action=action, before=before, after=snapshot(stored))


def _after_delete(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    audit_entry_record(instance=instance, action=AuditEntry.Action.DELETE, before=snapshot(instance), after=None)


def receivers_connect(model: type[models.Model]) -> None:
    uid = f"auditlog.{model._meta.label}"
    pre_save.connect(_before_save, sender=model, dispatch_uid=f"{uid}.pre_save")
    post_save.connect(_after_save, sender=model, dispatch_uid=f"{uid}.post_save")
    post_delete.connect(_after_delete, sender=model, dispatch_uid=f"{uid}.post_delete")
