from __future__ import annotations

from django.contrib import admin

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.audits.models import AuditFinding, AuditReport, ModelDowngrade


@admin.register(ModelDowngrade)
class ModelDowngradeAdmin(ScopedModelAdmin):
    list_display = ("large_model", "small_model", "max_prompt_tokens", "max_completion_tokens", "enabled")
    list_editable = ("enabled",)
    search_fields = ("large_model", "small_model")


class AuditFindingInline(admin.TabularInline):
    model = AuditFinding
    fields = ("position", "kind", "title", "tokens", "savings_tokens", "savings", "counted")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(AuditReport)
class AuditReportAdmin(ScopedModelAdmin):  # a month of every line
    list_display = ("month", "tokens", "savings_tokens", "savings", "currency", "finished_at", "broadcast_at")
    readonly_fields = ("month", "currency", "tokens", "savings_tokens", "savings", "started_at", "finished_at")
    inlines = [AuditFindingInline]
