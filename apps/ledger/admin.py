from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.accounts.admin_scope import KeptAdmin, ScopedModelAdmin
from apps.accounts.roles import user_has_role
from apps.ledger.models import (
    Account,
    CloseRequest,
    CostCentre,
    ElasticWindow,
    Finding,
    JournalEntry,
    JournalLine,
    MappingRule,
    MappingRuleRevision,
    Period,
    PeriodEvent,
)
from apps.ledger.services.periods import PeriodError, period_close, period_reopen

REBOOK_HINT = "Open months pick the change up within minutes; closed months get adjusting entries (manage.py accrue)."


@admin.register(Account)
class AccountAdmin(ScopedModelAdmin):
    list_display = ["code", "name", "kind", "role", "active"]
    list_editable = ["active"]

    def save_model(self, request: HttpRequest, obj: Account, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        self.message_user(request, REBOOK_HINT, messages.INFO)


@admin.register(MappingRule)
class MappingRuleAdmin(ScopedModelAdmin):
    list_display = ["priority", "name", "applies_to", "token_class", "reason", "dims", "elastic", "account", "active"]
    list_display_links = ["name"]
    list_select_related = ["account"]
    readonly_fields = ["revision", "updated_at"]

    def save_model(self, request: HttpRequest, obj: MappingRule, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        self.message_user(request, REBOOK_HINT, messages.INFO)


@admin.register(MappingRuleRevision)
class MappingRuleRevisionAdmin(KeptAdmin):
    list_display = ["rule_id", "revision", "changed_at", "snapshot"]


@admin.register(ElasticWindow)
class ElasticWindowAdmin(ScopedModelAdmin):
    line_field = "business_line"
    list_display = ["business_line", "name", "kind", "start", "end"]
    list_filter = ["kind", "business_line"]


class PeriodEventInline(admin.TabularInline):
    model = PeriodEvent
    extra = 0
    can_delete = False
    readonly_fields = ["action", "user", "note", "at"]
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Period)
class PeriodAdmin(KeptAdmin):
    list_display = ["month", "status", "closed_at", "closed_by"]
    inlines = [PeriodEventInline]
    actions = ["close", "reopen"]

    @admin.action(description="Close (complete the journal, run month-end checks, lock)")
    def close(self, request: HttpRequest, queryset: QuerySet[Period]) -> None:
        if not user_has_role(request.user, "finance", "admin"):
            raise PermissionDenied
        for period in queryset.order_by("month"):
            try:
                result = period_close(month=period.month, user=request.user)
            except PeriodError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(request, f"Closed {period.label}: {len(result.findings)} findings.", messages.SUCCESS)

    @admin.action(description="Reopen (admin only; recorded)")
    def reopen(self, request: HttpRequest, queryset: QuerySet[Period]) -> None:
        for period in queryset:
            try:
                period_reopen(month=period.month, user=request.user, reason=f"reopened in the admin by {request.user}")
            except (PeriodError, PermissionDenied) as exc:
                self.message_user(request, str(exc) or "Reopening needs the admin role.", messages.ERROR)
                continue
            self.message_user(request, f"Reopened {period.label}.", messages.SUCCESS)


class JournalLineInline(admin.TabularInline):
    model = JournalLine
    extra = 0
    can_delete = False
    fields = ["account", "cost_centre", "model", "pool", "debit", "credit", "tokens", "basis"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(JournalEntry)
class JournalEntryAdmin(KeptAdmin):
    list_display = ["period", "day", "kind", "adjusts", "currency", "memo", "created_at"]
    list_filter = ["kind", "currency", "period"]
    date_hierarchy = "day"
    inlines = [JournalLineInline]


@admin.register(CostCentre)
class CostCentreAdmin(ScopedModelAdmin):
    """A business line's cost-centre code and name, as the finance pages show it."""

    line_field = "business_line"
    list_display = ["code", "name", "business_line", "active"]
    list_filter = ["active"]
    search_fields = ["code", "name", "business_line"]


@admin.register(Finding)
class FindingAdmin(KeptAdmin):
    line_field = "business_line"  # empty (the whole company) is outside any scope
    list_display = ["period", "kind", "business_line", "action", "message", "delivered_at"]
    list_filter = ["kind", "period"]


@admin.register(CloseRequest)
class CloseRequestAdmin(KeptAdmin):
    """Requests are made and decided on the close page (/finance/close/<month>/), by two people."""

    list_display = ["month", "state", "prepared_by", "submitted_at", "decided_by", "decided_at"]
    list_filter = ["state", "month"]


# The idle policy and the pools' reserved shares (apps/ledger/idle/).
from apps.ledger.idle import admin as _idle_admin  # noqa: E402, F401
