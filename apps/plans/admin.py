"""Budgets and revenue in the admin (the plans page is where finance usually sets them): a closed
month's are part of its books, so they are not deleted here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.ledger.models import Period
from apps.plans.models import Budget, Revenue


def _in_closed_month(obj: Budget | Revenue | None) -> bool:
    """A closed month's budget or revenue is part of its books: not deleted here (the database
    refuses it too); changes are refused by the models' validation with the same reason."""
    return obj is not None and Period.first_closed([obj.month]) is not None


@admin.register(Budget)
class BudgetAdmin(ScopedModelAdmin):
    line_field = "business_line"
    list_display = [
        "month",
        "business_line",
        "team",
        "caller",
        "dim",
        "value",
        "hard",
        "amount",
        "currency",
        "tokens",
        "updated_by",
        "updated_at",
    ]
    list_filter = ["month", "hard"]
    search_fields = ["business_line", "team", "caller", "value"]
    readonly_fields = ["updated_by", "updated_at"]

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        obj.updated_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)

    def has_delete_permission(self, request: HttpRequest, obj: Budget | None = None) -> bool:
        return super().has_delete_permission(request, obj) and not _in_closed_month(obj)


@admin.register(Revenue)
class RevenueAdmin(ScopedModelAdmin):
    line_field = "business_line"
    list_display = ["month", "business_line", "amount", "currency", "entered_by", "entered_at"]
    list_filter = ["month"]
    readonly_fields = ["entered_by", "entered_at"]

    def save_model(self, request: HttpRequest, obj: Revenue, form: Any, change: bool) -> None:
        obj.entered_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)

    def has_delete_permission(self, request: HttpRequest, obj: Revenue | None = None) -> bool:
        return super().has_delete_permission(request, obj) and not _in_closed_month(obj)
