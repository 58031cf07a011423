"""Budgets and revenue of a month on a page (finance and admin): one row per business line,
saved all at once through the planning services (a closed month is refused as everywhere),
and a copy of the month before's for the lines that have none. A user scoped to some lines
sees and edits only theirs."""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.scopes import business_lines_of, finance_act_check
from apps.common.buckets import month_of, next_month, previous_month
from apps.ledger.links import page_link
from apps.ledger.models import CostCentre, Period
from apps.ledger.services.periods import parse_month
from apps.plans.planning import (
    PlanningError,
    PlanRow,
    PlanRowsError,
    plan_rows,
    plans_copy_previous,
    plans_save,
)
from apps.pricing.models import Currency

CURRENCIES = [("", "—"), *((c, c) for c in Currency.values)]  # ISO codes, as finance writes them


NEEDS_FINANCE = gettext_noop("budgets and revenue are set by the finance and admin roles")


class PlanRowForm(forms.Form):
    business_line = forms.CharField(max_length=256, label=gettext_lazy("Business line"))
    budget_amount = forms.DecimalField(
        max_digits=20, decimal_places=2, min_value=0, required=False, label=gettext_lazy("Budget")
    )
    budget_currency = forms.ChoiceField(choices=CURRENCIES, required=False, label=gettext_lazy("Currency"))
    budget_tokens = forms.IntegerField(min_value=0, required=False, label=gettext_lazy("Token budget"))
    revenue_amount = forms.DecimalField(
        max_digits=20, decimal_places=2, min_value=0, required=False, label=gettext_lazy("Revenue")
    )
    revenue_currency = forms.ChoiceField(choices=CURRENCIES, required=False, label=gettext_lazy("Currency"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A row's cells sit under the table's headers, with no label of their own: each field is
        # named for a screen reader by its line and column.
        line = self.initial.get("business_line") or ""
        for field in self.fields.values():
            field.widget.attrs["aria-label"] = f"{line} {field.label}".strip()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("budget_amount") is not None and not data.get("budget_currency"):
            self.add_error("budget_currency", _("a budget amount needs its currency"))
        if data.get("revenue_amount") is not None and not data.get("revenue_currency"):
            self.add_error("revenue_currency", _("a revenue amount needs its currency"))
        return data

    def row(self) -> PlanRow:
        d = self.cleaned_data
        return PlanRow(
            d["business_line"].strip(),
            d.get("budget_amount"),
            d.get("budget_currency") or "",
            d.get("budget_tokens"),
            d.get("revenue_amount"),
            d.get("revenue_currency") or "",
        )


class _Rows(forms.BaseFormSet):
    def clean(self) -> None:
        seen: set[str] = set()
        for form in self.forms:
            line = (form.cleaned_data or {}).get("business_line", "").strip()
            if line and line in seen:
                form.add_error("business_line", _("this business line is listed twice"))
            seen.add(line)


PlanFormSet = forms.formset_factory(PlanRowForm, formset=_Rows, extra=1)


def _initial(rows: list[PlanRow]) -> list[dict[str, Any]]:
    return [vars(row).copy() for row in rows]


@require_GET
@login_required
def plans_latest(request: HttpRequest) -> HttpResponse:
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    return redirect("finance-plans", month=f"{month_of(timezone.now()):%Y-%m}")


@require_http_methods(["GET", "POST"])
@login_required
def plans_page(request: HttpRequest, month: str) -> HttpResponse:
    """GET: the month's rows; POST: save them all, or nothing with each row's error."""
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    first = parse_month(month, error=Http404)
    lines = business_lines_of(request.user)
    initial = _initial(plan_rows(month=first, business_lines=lines))
    status, page_error = 200, ""
    if request.method == "POST":
        formset = PlanFormSet(request.POST, initial=initial)
        changed, page_error = _save(formset, first, request.user, lines)
        if changed is not None:
            saved = ngettext(
                "Saved: %(count)s business line changed.", "Saved: %(count)s business lines changed.", changed
            )
            messages.success(request, saved % {"count": changed})
            return redirect("finance-plans", month=f"{first:%Y-%m}")
        status = 400
    else:
        formset = PlanFormSet(initial=initial)
    names = dict(CostCentre.objects.values_list("business_line", "name"))
    context = {
        "month": f"{first:%Y-%m}",
        "previous": f"{previous_month(first):%Y-%m}",
        "next": f"{next_month(first):%Y-%m}",
        "formset": formset,
        "rows": [(form, names.get(form.initial.get("business_line", ""), "")) for form in formset.forms],
        "closed": Period.first_closed([first]) is not None,
        "scoped": lines is not None,
        "page_error": page_error,
        "finance": page_link("finance"),
    }
    return render(request, "plans/plans.html", context, status=status)


def _save(formset: Any, month: date, user: Any, lines: list[str] | None) -> tuple[int | None, str]:
    """(rows changed, "") when saved; (None, the page's error) otherwise, the rows' errors on their forms."""
    if not formset.is_valid():
        return None, ""
    named = [f for f in formset.forms if f.cleaned_data.get("business_line", "").strip()]
    try:
        return plans_save(month=month, rows=[f.row() for f in named], user=user, business_lines=lines), ""
    except PlanRowsError as exc:
        for i, message in exc.errors.items():
            named[i].add_error(None, message)
        return None, ""
    except PlanningError as exc:
        return None, str(exc)  # the month is closed


@require_POST
@login_required
def plans_copy(request: HttpRequest, month: str) -> HttpResponse:
    """Copy the month before's budgets and revenue into this month where it has none."""
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    first = parse_month(month, error=Http404)
    try:
        copied = plans_copy_previous(month=first, user=request.user, business_lines=business_lines_of(request.user))
    except PlanningError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            _("Copied %(count)s budgets and revenue rows from %(month)s.")
            % {"count": copied, "month": f"{previous_month(first):%Y-%m}"},
        )
    return redirect("finance-plans", month=f"{first:%Y-%m}")


urlpatterns = [
    path("finance/plans/", plans_latest, name="finance-plans-latest"),
    path("finance/plans/<str:month>/", plans_page, name="finance-plans"),
    path("finance/plans/<str:month>/copy/", plans_copy, name="finance-plans-copy"),
]
