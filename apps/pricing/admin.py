from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin, messages
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from apps.accounts.admin_scope import ReadOnlyAdmin, ScopedModelAdmin
from apps.pricing.models import CostPool, HourlyCost, PoolIdleHour, Price, PriceVersion, UnpricedHour
from apps.pricing.selectors import unpriced_message, unpriced_models_recent

REPRICE_HINT = "Hours already priced keep their cost until repriced: manage.py reprice --from {start} --to {end}"


def _reprice_hint(admin_: admin.ModelAdmin, request: HttpRequest, start: datetime, end: datetime | None) -> None:
    """Say which reprice applies a change to hours already priced (none when it starts later)."""
    now = timezone.now()
    if start > now:
        return
    last_day = (min(end or now, now) - timedelta(microseconds=1)).date()
    hint = REPRICE_HINT.format(start=start.date(), end=last_day + timedelta(days=1))
    admin_.message_user(request, hint, messages.INFO)


class UnpricedBannerMixin:
    """Changelists of the price book show which models have tokens but no price."""

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            models = unpriced_models_recent()
        except DatabaseError:
            models = []
        if models:
            messages.warning(request, unpriced_message(models))
        return super().changelist_view(request, extra_context)  # type: ignore[misc]


class PriceInline(admin.TabularInline):
    model = Price
    extra = 3
    fields = ["model_pattern", "kind", "per_million"]


@admin.register(PriceVersion)
class PriceVersionAdmin(UnpricedBannerMixin, ScopedModelAdmin):
    list_display = ["effective_from", "name", "currency", "created_at"]
    readonly_fields = ["created_at"]
    inlines = [PriceInline]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        version = form.instance
        following = PriceVersion.objects.filter(effective_from__gt=version.effective_from).order_by("effective_from")
        _reprice_hint(self, request, version.effective_from, following.values_list("effective_from", flat=True).first())


@admin.register(CostPool)
class CostPoolAdmin(UnpricedBannerMixin, ScopedModelAdmin):
    list_display = ["name", "currency", "gpus", "cost_per_gpu_hour", "capacity", "effective_from", "effective_to"]
    readonly_fields = ["created_at"]

    def save_model(self, request: HttpRequest, obj: CostPool, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change:  # a new pool's past hours are allocated by the minute job; changed ones need a reprice
            _reprice_hint(self, request, obj.effective_from, obj.effective_to)


@admin.register(HourlyCost)
class HourlyCostAdmin(ReadOnlyAdmin):
    list_display = ["hour", "model", "reason", "component", "tokens", "cost", "currency", "price_version", "pool"]
    list_filter = ["currency", "pool"]
    list_select_related = ["model", "reason", "price_version", "pool"]
    date_hierarchy = "hour"
    show_full_result_count = False


@admin.register(PoolIdleHour)
class PoolIdleHourAdmin(ReadOnlyAdmin):
    list_display = ["hour", "pool", "pool_cost", "allocated", "idle", "utilisation", "currency"]
    list_filter = ["pool"]
    date_hierarchy = "hour"


@admin.register(UnpricedHour)
class UnpricedHourAdmin(ReadOnlyAdmin):
    list_display = ["hour", "model", "kind", "tokens"]
    list_select_related = ["model"]
    date_hierarchy = "hour"
