"""Suppliers and their column mappings are set here once; bills and adjustments are read here
(they are made on the reconciliation page or by manage.py import_bill). Rows span business
lines, so users scoped to some lines do not see them."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.accounts.admin_scope import KeptAdmin, ScopedModelAdmin
from apps.reconciliation.models import Bill, BillAdjustment, BillRowError, Supplier


@admin.register(Supplier)
class SupplierAdmin(ScopedModelAdmin):
    list_display = ["name", "kind", "currency", "pool", "model_patterns", "key_dim", "finding_threshold", "active"]
    fieldsets = [
        (None, {"fields": ["name", "kind", "currency", "model_patterns", "model_aliases", "pool", "key_dim"]}),
        (
            "Columns of the bill (header names)",
            {
                "fields": [
                    "col_day",
                    "col_model",
                    "col_key",
                    "col_input_tokens",
                    "col_output_tokens",
                    "col_amount",
                    "col_currency",
                    "date_format",
                    "decimal_separator",
                    "delimiter",
                ]
            },
        ),
        (
            "Tolerances (a difference passes both) and the month-end finding",
            {"fields": ["amount_abs", "amount_rel", "tokens_abs", "tokens_rel", "finding_threshold", "cost_centre"]},
        ),
        (None, {"fields": ["active"]}),
    ]


class BillRowErrorInline(admin.TabularInline):
    model = BillRowError
    fields = ["row", "reason", "raw"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Bill)
class BillAdmin(KeptAdmin):
    list_display = ["supplier", "month", "state", "rows", "total", "currency", "filename", "imported_by", "imported_at"]
    list_filter = ["state", "supplier"]
    inlines = [BillRowErrorInline]


@admin.register(BillAdjustment)
class BillAdjustmentAdmin(KeptAdmin):
    list_display = ["supplier", "month", "amount", "currency", "state", "proposed_by", "decided_by", "entry"]
    list_filter = ["state", "supplier"]
