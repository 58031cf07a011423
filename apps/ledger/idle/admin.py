"""The idle policy and the reserved shares, set by finance. Both span business lines, so users
scoped to some lines do not see them; a setting that applies to a closed month is not changed
or deleted here (its validation says why)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.ledger.idle.models import IdlePolicy, ReservedShare

REBOOK_HINT = (
    "The open months it applies to are booked again by the next accrual (within minutes); "
    "closed months keep the policy they were closed with."
)


class _SettingAdmin(ScopedModelAdmin):
    readonly_fields = ["changed_by", "changed_at"]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        obj.changed_by = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)
        self.message_user(request, REBOOK_HINT, messages.INFO)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_delete_permission(request, obj):
            return False
        if obj is not None:
            try:  # removing it changes the months it applied to
                obj.months_open_check()
            except ValidationError:
                return False
        return True


@admin.register(IdlePolicy)
class IdlePolicyAdmin(_SettingAdmin):
    list_display = ["month", "policy", "note", "changed_by", "changed_at"]


@admin.register(ReservedShare)
class ReservedShareAdmin(_SettingAdmin):
    list_display = ["pool", "business_line", "month", "percent", "changed_by", "changed_at"]
    list_filter = ["pool", "month"]
    search_fields = ["business_line"]
