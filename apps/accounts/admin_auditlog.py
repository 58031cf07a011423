"""The audit log's admin page, read-only and closed to scoped users. Registered here, with the
scoped admin it builds on: the audit log sits below accounts (accounts' sign-on writes to it)
and imports no app."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.auditlog.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(ScopedModelAdmin):
    """Read-only: nobody, a superuser included, adds, changes or deletes an entry here."""

    list_display = ["at", "actor_name", "source", "action", "model", "object_repr", "changed"]
    list_filter = ["action", "source", "model"]
    search_fields = ["actor_name", "object_repr", "object_id", "path"]
    date_hierarchy = "at"
    fields = ["at", "actor", "actor_name", "source", "path", "action", "model", "object_id", "object_repr", "diff"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="changed fields")
    def changed(self, entry: AuditEntry) -> str:
        return ", ".join(entry.changes)

    @admin.display(description="before → after")
    def diff(self, entry: AuditEntry) -> str:
        text = json.dumps(entry.changes, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html("<pre>{}</pre>", text)
