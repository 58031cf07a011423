"""Plans: a business line's budget for a month (of the line, a team, a caller, one value of a
rollup dim; soft or hard, held at the edge once spent), the overrides finance grants a spent hard
budget, and the revenue the elastic check reads. The tables keep the names they had in the ledger,
and a closed month's plans are refused by the ledger's trigger (ledger_plan_guard) as by the
models' validation here."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.ledger.models import Period, validate_month
from apps.pricing.models import Currency

# Budgets and revenue of a closed month are part of its books: the model's validation (the
# admin's forms, the services) says so first; the database refuses it too (ledger_plan_guard).
CLOSED_MONTH = "{month} is closed; reopen it (admin, with a reason) to change its {what}"


def validate_month_open(obj: Budget | Revenue, what: str) -> None:
    """Refuse a change to a budget or revenue row in a closed month, or moving one into one."""
    months: list[date | None] = [obj.month]
    if obj.pk is not None:
        months += type(obj).objects.filter(pk=obj.pk).values_list("month", flat=True)
    closed = Period.first_closed(months)
    if closed is not None:
        raise ValidationError(CLOSED_MONTH.format(month=f"{closed:%Y-%m}", what=what))


class BudgetQuerySet(models.QuerySet["Budget"]):
    def of_lines(self) -> BudgetQuerySet:
        """The business lines' own budgets: neither a team's, a caller's nor a dim value's."""
        return self.filter(team="", caller="", dim="")


class Budget(models.Model):
    """A business line's budget for a month, in money and/or tokens; optionally of one team of
    the line, of one caller (the attribution map's name of who called, the records' `caller`
    dim), or of one caller within one team; each may be narrowed to one value of another dim the
    hourly rollup keeps (`dim` and `value`: user u-42), or the line to that value alone. A soft
    budget alerts (apps/alerts); a hard one is also held at the edge: the serving middleware and
    the proxy refuse the scope's new requests once it is spent, unless an override is active
    (apps/plans/budget_state.py, docs/budgets.md)."""

    business_line = models.CharField(max_length=256)
    # Database defaults too: rows written in SQL (and code that predates these) stay line budgets, soft.
    team = models.CharField(
        max_length=256, blank=True, default="", db_default="", help_text="Empty: the whole business line."
    )
    caller = models.CharField(
        max_length=256,
        blank=True,
        default="",
        db_default="",
        help_text="A caller of the attribution map ([callers.<name>]): its requests only. Empty: every caller.",
    )
    dim = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="A dim the hourly rollup keeps (COSTPLATFORM_ROLLUP_DIMS), e.g. user: with its value, a budget of "
        "the requests carrying that value only. Empty: none.",
    )
    value = models.CharField(
        max_length=256, blank=True, default="", db_default="", help_text="The dim's value, e.g. u-42."
    )
    hard = models.BooleanField(
        default=False, db_default=False, help_text="Hard: the edge refuses new requests once spent. Soft: alerts only."
    )
    month = models.DateField(validators=[validate_month])
    currency = models.CharField(max_length=3, choices=Currency.choices, blank=True)
    amount = models.DecimalField(max_digits=20, decimal_places=2, null=True, blank=True)
    tokens = models.BigIntegerField(null=True, blank=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BudgetQuerySet.as_manager()

    class Meta:
        verbose_name = _("budget")
        verbose_name_plural = _("budgets")
        db_table = "ledger_budget"  # kept from when the ledger held it
        ordering = ["-month", "business_line"]
        constraints = [
            models.UniqueConstraint(
                fields=["business_line", "team", "caller", "dim", "value", "month"], name="ledger_budget_key"
            ),
            # A dim budget names both the dim and its value; a budget of no dim names neither.
            models.CheckConstraint(
                condition=Q(dim="", value="") | (~Q(dim="") & ~Q(value="")), name="ledger_budget_dim_value"
            ),
            models.CheckConstraint(
                condition=Q(amount__isnull=False) | Q(tokens__isnull=False), name="ledger_budget_some"
            ),
            models.CheckConstraint(
                condition=Q(amount__isnull=True) | ~Q(currency=""), name="ledger_budget_amount_currency"
            ),
            models.CheckConstraint(condition=Q(amount__gte=0) | Q(amount__isnull=True), name="ledger_budget_amount"),
            models.CheckConstraint(condition=Q(tokens__gte=0) | Q(tokens__isnull=True), name="ledger_budget_tokens"),
            models.CheckConstraint(condition=Q(month__day=1), name="ledger_budget_month"),
        ]

    def __str__(self) -> str:
        scope = budget_scope(self.business_line, self.team, self.caller, self.dim, self.value)
        return f"{scope} {self.month:%Y-%m}"

    def clean(self) -> None:
        validate_month_open(self, "budget")
        problem = budget_dim_problem(self.dim, self.value)
        if problem:
            raise ValidationError({"dim" if self.dim else "value": problem})


# The dims a budget names in fields of their own; `dim` is any other the rollup keeps.
SCOPE_FIELDS = ("business_line", "team", "caller")


def budget_dim_problem(dim: str, value: str) -> str:
    """What is wrong with a budget's dim and value, in words ("" where nothing is): the dim must
    be one the hourly rollup keeps (its use is read from there), other than the scope's own."""
    if not dim:
        return "a value needs its dim (e.g. dim user, value u-42)" if value else ""
    kept = [d for d in settings.ROLLUP_DIMS if d not in SCOPE_FIELDS]
    if dim in SCOPE_FIELDS:
        return f"{dim} has a field of its own; dim names another one the hourly rollup keeps ({', '.join(kept)})"
    if dim not in settings.ROLLUP_DIMS:
        return (
            f"a budget is of a dim the hourly rollup keeps ({', '.join(kept)}; COSTPLATFORM_ROLLUP_DIMS adds "
            f"one), not of {dim!r}"
        )
    return "" if value else f"a budget of dim {dim} needs its value"


def budget_scope(business_line: str, team: str, caller: str, dim: str = "", value: str = "") -> str:
    """A budget's scope in short: `line`, `line/team`, `line caller=name`, `line/team caller=name`,
    and a dim value's after them: `line user=u-42`, `line/team caller=name user=u-42`."""
    scope = f"{business_line}/{team}" if team else business_line
    scope = f"{scope} caller={caller}" if caller else scope
    return f"{scope} {dim}={value}" if dim else scope


class Revenue(models.Model):
    """A business line's revenue for a month, entered by finance (the elastic check reads it)."""

    business_line = models.CharField(max_length=256)
    month = models.DateField(validators=[validate_month])
    currency = models.CharField(max_length=3, choices=Currency.choices, default=Currency.CNY)
    amount = models.DecimalField(max_digits=20, decimal_places=2)
    entered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    entered_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("revenue")
        verbose_name_plural = _("revenues")
        db_table = "ledger_revenue"  # kept from when the ledger held it
        ordering = ["-month", "business_line"]
        constraints = [
            models.UniqueConstraint(fields=["business_line", "month", "currency"], name="ledger_revenue_key"),
            models.CheckConstraint(condition=Q(amount__gte=0), name="ledger_revenue_amount"),
            models.CheckConstraint(condition=Q(month__day=1), name="ledger_revenue_month"),
        ]

    def clean(self) -> None:
        validate_month_open(self, "revenue")


class BudgetOverride(models.Model):
    """Finance lets a budget's scope (line, team, caller) be served past its spent hard budget until a
    time, with a reason. Audit-logged; the edge learns it with the budget state."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="overrides")
    until = models.DateTimeField()
    reason = models.TextField()
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "ledger_budgetoverride"  # kept from when the ledger held it
        ordering = ["-until", "-id"]
        constraints = [models.CheckConstraint(condition=~Q(reason=""), name="ledger_budgetoverride_reason")]

    def __str__(self) -> str:
        return f"{self.budget} until {self.until:%Y-%m-%d %H:%M}"
