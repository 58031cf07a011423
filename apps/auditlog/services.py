"""Writing audit entries: a JSON snapshot of an object's fields and the diff of two snapshots."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from apps.auditlog.context import current_actor
from apps.auditlog.models import AuditEntry

Snapshot = dict[str, Any]


def snapshot(instance: models.Model) -> Snapshot:
    """The concrete fields as JSON values (Decimal and datetimes as strings). Binary fields,
    such as a collector key's hash, are left out: the log shows no secret material."""
    values = {
        field.attname: getattr(instance, field.attname)
        for field in instance._meta.concrete_fields
        if not isinstance(field, models.BinaryField)
    }
    return json.loads(json.dumps(values, cls=DjangoJSONEncoder))


def snapshot_diff(before: Snapshot | None, after: Snapshot | None) -> dict[str, list[Any]]:
    before, after = before or {}, after or {}
    return {
        name: [before.get(name), after.get(name)]
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }


def audit_entry_record(
    *, instance: models.Model, action: str, before: Snapshot | None, after: Snapshot | None
) -> AuditEntry | None:
    """Record one change (None when an update changed nothing)."""
    changes = snapshot_diff(before, after)
    if action == AuditEntry.Action.UPDATE and not changes:
        return None
    actor = current_actor()
    return AuditEntry.objects.create(
        actor=actor.user,
        actor_name=actor.name,
        source=actor.source,
        path=actor.path,
        action=action,
        model=instance._meta.label,
        object_id=str(instance.pk),
        object_repr=str(instance)[:300],
        before=before,
        after=after,
        changes=changes,
    )
