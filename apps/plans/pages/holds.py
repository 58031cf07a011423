"""Hard budgets on the budgets page: where each budget of the month stands now (the partial
templates/plans/_budget_holds.html, rendered by the `budget_holds` tag), finance's
temporary override of a spent hard budget (POST budgets/<id>/override/, audit-logged) and
finance's budget of one team, one caller or one value of another rollup dim (POST
budgets/scoped/; the plans page sets the lines' own)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from apps.accounts.scopes import business_lines_of, sees_money
from apps.common.buckets import accounting_zone, month_of
from apps.common.formats import when_text
from apps.ingest.selectors import dim_values
from apps.ledger.services.periods import parse_month
from apps.plans.budget_state import BudgetState, budget_states
from apps.plans.models import SCOPE_FIELDS, Budget
from apps.plans.overrides import OverrideError, budget_override_grant
from apps.plans.planning import PlanningError, budget_set
from apps.pricing.models import Currency

OVERRIDE_PERMISSION = "plans.add_budgetoverride"
SET_PERMISSION = "plans.change_budget"
SUGGESTED = ("business_line", "team", "caller")  # the scoped budget form's fields with a list of known values


class OverrideForm(forms.Form):
    until = forms.DateTimeField(
        label=gettext_lazy("Served until"),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
        help_text=gettext_lazy("In the accounting time zone; at the latest the month's end."),
    )
    reason = forms.CharField(label=gettext_lazy("Reason"), max_length=2000)


class ScopedBudgetForm(forms.Form):
    """A budget of one team, one caller, or one caller within one team (finance's words), or of
    one value of another dim the hourly rollup keeps (`user` `u-42`), alone or within them."""

    business_line = forms.CharField(label=gettext_lazy("Business line"), max_length=256)
    team = forms.CharField(
        label=gettext_lazy("Team"), max_length=256, required=False, help_text=gettext_lazy("Empty: every team.")
    )
    caller = forms.CharField(
        label=gettext_lazy("Caller"),
        max_length=256,
        required=False,
        help_text=gettext_lazy(
            "The application's name in the attribution map, known by its API key. Empty: every caller."
        ),
    )
    # Which dims are kept is checked by the budget itself (apps.plans.models.budget_dim_problem).
    dim = forms.CharField(label=gettext_lazy("Dim"), max_length=64, required=False)
    value = forms.CharField(label=gettext_lazy("Dim value"), max_length=256, required=False)
    month = forms.CharField(label=gettext_lazy("Month"), max_length=7)
    tokens = forms.IntegerField(label=gettext_lazy("Tokens"), min_value=0, required=False)
    amount = forms.DecimalField(
        label=gettext_lazy("Amount"), max_digits=20, decimal_places=2, min_value=0, required=False
    )
    currency = forms.ChoiceField(label=gettext_lazy("Currency"), choices=[("", "—"), *Currency.choices], required=False)
    hard = forms.BooleanField(label=gettext_lazy("Hard: refused at the edge once spent"), required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not (data.get("team") or data.get("caller") or data.get("dim")):
            raise forms.ValidationError(
                _("Name a team, a caller or a dim and its value: the line's own budget is set on the plans page.")
            )
        return data


def holds_context(request: HttpRequest, *, now: datetime) -> dict[str, Any]:
    """The partial's context: the month's budgets the reader may see, as they stand now."""
    lines = business_lines_of(request.user)
    states = budget_states(now=now, business_lines=lines)
    may_set = request.user.has_perm(SET_PERMISSION)
    return {
        "states": states,
        "hold_month": f"{month_of(now):%Y-%m}",
        "money": sees_money(request.user),
        "may_override": request.user.has_perm(OVERRIDE_PERMISSION),
        "may_set": may_set,
        # What the form suggests: the lines, teams and callers the reader's records carry, and
        # the other dims a budget may be of.
        "known": {**dim_values(names=list(SUGGESTED), lines=lines), "dim": budget_dims()} if may_set else {},
        "zone": accounting_zone().key,
        "currencies": Currency.values,
    }


def budget_dims() -> list[str]:
    """The dims a budget may be of besides its line, team and caller: those the rollup keeps."""
    return [dim for dim in settings.ROLLUP_DIMS if dim not in SCOPE_FIELDS]


def state_label(state: BudgetState) -> str:
    if state.overridden:
        return _("overridden")
    if state.holds:
        return _("refusing")
    return _("spent") if state.spent else _("within")


@require_POST
@login_required
def budget_override(request: HttpRequest, budget_id: int) -> HttpResponse:
    """Grant an override from the budgets page: finance (and admin), within the reader's lines."""
    if not request.user.has_perm(OVERRIDE_PERMISSION):
        raise PermissionDenied("overriding a budget needs the finance or admin role")
    budget = get_object_or_404(Budget, pk=budget_id)
    _line_check(request, budget.business_line)
    form = OverrideForm(request.POST)
    back = reverse("budgets") + "#budget-holds"
    if not form.is_valid():
        messages.error(request, _("Override not granted: %(errors)s") % {"errors": _form_errors(form)})
        return redirect(back)
    until = form.cleaned_data["until"].replace(tzinfo=None).replace(tzinfo=accounting_zone()).astimezone(UTC)
    try:
        budget_override_grant(
            budget=budget, until=until, reason=form.cleaned_data["reason"], user=request.user, now=datetime.now(UTC)
        )
    except OverrideError as exc:
        messages.error(request, _("Override not granted: %(errors)s") % {"errors": exc})
        return redirect(back)
    shown = f"{when_text(until, timezone.get_current_timezone())} {timezone.get_current_timezone_name()}"
    messages.success(request, _("%(budget)s is served until %(until)s.") % {"budget": budget, "until": shown})
    return redirect(back)


@require_POST
@login_required
def budget_scoped_set(request: HttpRequest) -> HttpResponse:
    """Set (create or replace) a team's or a caller's budget from the budgets page: finance
    (and admin), within the reader's lines."""
    if not request.user.has_perm(SET_PERMISSION):
        raise PermissionDenied("setting a budget needs the finance or admin role")
    form = ScopedBudgetForm(request.POST)
    back = reverse("budgets") + "#budget-holds"
    if not form.is_valid():
        messages.error(request, _("Budget not set: %(errors)s") % {"errors": _form_errors(form)})
        return redirect(back)
    data = form.cleaned_data
    _line_check(request, data["business_line"])
    try:
        budget = budget_set(
            business_line=data["business_line"],
            team=data["team"],
            caller=data["caller"],
            dim=data["dim"],
            value=data["value"],
            month=parse_month(data["month"]),
            tokens=data["tokens"],
            amount=data["amount"],
            currency=data["currency"],
            hard=data["hard"],
            user=request.user,
        )
    except (PlanningError, ValidationError, ValueError) as exc:
        errors = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        messages.error(request, _("Budget not set: %(errors)s") % {"errors": errors})
        return redirect(back)
    messages.success(request, _("Budget %(budget)s set.") % {"budget": budget})
    return redirect(back)


def _line_check(request: HttpRequest, business_line: str) -> None:
    """Refuse a budget of a business line outside the reader's scope."""
    lines = business_lines_of(request.user)
    if lines is not None and business_line not in lines:
        raise PermissionDenied("this business line is outside your scope")


def _form_errors(form: forms.Form) -> str:
    return "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())


urlpatterns = [
    path("budgets/<int:budget_id>/override/", budget_override, name="budget-override"),
    path("budgets/scoped/", budget_scoped_set, name="budget-scoped-set"),
]
