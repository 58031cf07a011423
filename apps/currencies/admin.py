"""Exchange rates in the admin: entered through the model (the audit log records each change), the
day marked for the next accrual as the rates page and import_rates mark it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from apps.accounts.admin_scope import ScopedModelAdmin
from apps.currencies.models import ExchangeRate
from apps.currencies.rates import rate_parse
from apps.currencies.signals import rate_changed

REBOOK_HINT = "Open months pick the change up within minutes; closed months get adjusting entries (manage.py accrue)."


class ExchangeRateForm(forms.ModelForm):
    """The admin's rate, checked as the rates page and import_rates check one (a day the books
    can hold, a rate the column can, a source without NUL)."""

    class Meta:
        model = ExchangeRate
        fields = ["day", "currency", "to", "rate", "source"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if all(data.get(name) is not None for name in ("day", "currency", "to", "rate", "source")):
            try:
                rate_parse(day=data["day"], currency=data["currency"], rate=data["rate"], source=data["source"],
                           to=data["to"])  # fmt: skip
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(ExchangeRate)
class ExchangeRateAdmin(ScopedModelAdmin):
    """A day's rate of a pair; saved through the model, so the audit log records each change
    (and the day is marked for the next accrual, as the rates page and import_rates do)."""

    form = ExchangeRateForm
    list_display = ["day", "currency", "to", "rate", "source", "entered_by", "entered_at"]
    list_filter = ["currency", "to"]
    date_hierarchy = "day"
    readonly_fields = ["entered_by", "entered_at"]

    def save_model(self, request: HttpRequest, obj: ExchangeRate, form: Any, change: bool) -> None:
        obj.entered_by = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)
        rate_changed.send(sender=ExchangeRate, day=obj.day)
        self.message_user(request, REBOOK_HINT, messages.INFO)
