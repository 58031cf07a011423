"""Budgets, revenue and budget against actual over HTTP (the edge's budget state is
budget_state.py). Budgets and revenue are set by finance (or admin); engineers may read token
budgets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.replica import replica_view
from apps.ledger.api.common import (
    MoneyAware,
    SeesLedger,
    SeesLedgerOfLines,
    SeesMoney,
    as_download,
    field_error,
    lines_of,
    money,
    month_param,
    rows_of,
    sees_money,
)
from apps.ledger.api.views import CSV_FORMAT, PERIOD, RENDERERS
from apps.ledger.services.periods import parse_month
from apps.plans.models import Budget, Revenue
from apps.plans.planning import PlanningError, budget_set, revenue_set
from apps.plans.selectors import budget_vs_actual
from apps.pricing.models import Currency


@replica_view
class BudgetVsActualView(APIView):
    """Per business line: the month's budget and what its expense accounts got in the month
    (amount in the budget's currency, tokens), with the share used. Engineers: tokens only."""

    permission_classes = [SeesLedgerOfLines]
    renderer_classes = RENDERERS

    class Output(MoneyAware):
        class Meta:
            ref_name = "LedgerBudgetVsActualRow"

        money_fields = ("currency", "budget_amount", "actual_amount", "amount_used")
        month = serializers.CharField()
        business_line = serializers.CharField()
        currency = serializers.CharField()
        budget_amount = money(allow_null=True)
        actual_amount = money()
        amount_used = serializers.DecimalField(max_digits=12, decimal_places=4, allow_null=True)
        budget_tokens = serializers.IntegerField(allow_null=True)
        actual_tokens = serializers.IntegerField(help_text="Processed tokens booked to the line's expense accounts.")
        used_tokens = serializers.IntegerField(
            help_text="Tokens as a token budget counts them: prompt (cached included) + completion, as records arrive."
        )
        tokens_used = serializers.DecimalField(
            max_digits=12, decimal_places=4, allow_null=True, help_text="used_tokens / budget_tokens."
        )

    @extend_schema(
        operation_id="ledger_budget_vs_actual",
        parameters=[PERIOD, CSV_FORMAT],
        responses={200: rows_of(Output, "LedgerBudgetVsActualPage")},
    )
    def get(self, request: Request) -> Response:
        month = month_param(request)
        found = budget_vs_actual(month=month, business_lines=lines_of(request))
        data = self.Output(found, many=True, context={"money": sees_money(request)}).data
        return as_download(Response({"rows": data}), request, f"budget-vs-actual-{month:%Y-%m}")


class _FinanceWrites(BasePermission):
    """Reads for every ledger role, writes for finance and admin."""

    def has_permission(self, request: Any, view: Any) -> bool:
        allowed = SeesLedger if request.method in ("GET", "HEAD", "OPTIONS") else SeesMoney
        return bool(allowed().has_permission(request, view))


def _plan_put(
    *, request: Request, serializer: type[serializers.Serializer], write: Callable[..., Any], field: str
) -> Any:
    """Validate the body and set the budget or revenue it names; a refusal is a 400 under `field`."""
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    month = parse_month(fields.pop("month"), error=field_error("month"))
    try:
        return write(month=month, user=request.user, **fields)
    except PlanningError as exc:
        raise exceptions.ValidationError({field: [str(exc)]}) from exc
    except DjangoValidationError as exc:
        raise exceptions.ValidationError({field: exc.messages}) from exc


class BudgetsView(APIView):
    """GET: the budgets of a period (engineers: token budgets only). PUT: set one (finance)."""

    permission_classes = [_FinanceWrites]
    renderer_classes = RENDERERS

    class Input(serializers.Serializer):
        class Meta:
            ref_name = "LedgerBudgetIn"

        business_line = serializers.CharField(max_length=256)
        month = serializers.CharField(help_text="YYYY-MM")
        amount = serializers.DecimalField(max_digits=20, decimal_places=2, min_value=0, required=False, allow_null=True)
        currency = serializers.ChoiceField(choices=Currency.choices, required=False, allow_blank=True, default="")
        tokens = serializers.IntegerField(min_value=0, required=False, allow_null=True)
        team = serializers.CharField(max_length=256, required=False, allow_blank=True, default="")
        caller = serializers.CharField(
            max_length=256,
            required=False,
            allow_blank=True,
            default="",
            help_text="A caller of the attribution map ([callers.<name>]): a budget of its requests only.",
        )
        dim = serializers.CharField(
            max_length=64,
            required=False,
            allow_blank=True,
            default="",
            help_text="A dim the hourly rollup keeps (COSTPLATFORM_ROLLUP_DIMS), e.g. user: with value, a budget of "
            "the requests carrying that value only. Another dim is refused.",
        )
        value = serializers.CharField(
            max_length=256, required=False, allow_blank=True, default="", help_text="The dim's value, e.g. u-42."
        )
        hard = serializers.BooleanField(
            required=False, allow_null=True, default=None, help_text="Hard: held at the edge. Omitted: unchanged."
        )

    class Output(MoneyAware):
        class Meta:
            ref_name = "LedgerBudget"

        money_fields = ("amount", "currency")
        business_line = serializers.CharField()
        month = serializers.DateField(format="%Y-%m")
        amount = money(allow_null=True)
        currency = serializers.CharField()
        tokens = serializers.IntegerField(allow_null=True)
        team = serializers.CharField()
        caller = serializers.CharField()
        dim = serializers.CharField()
        value = serializers.CharField()
        hard = serializers.BooleanField()
        updated_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="ledger_budgets",
        parameters=[PERIOD, CSV_FORMAT],
        responses={200: rows_of(Output, "LedgerBudgetsPage")},
    )
    def get(self, request: Request) -> Response:
        month = month_param(request)
        data = self.Output(Budget.objects.filter(month=month), many=True, context={"money": sees_money(request)}).data
        return as_download(Response({"rows": data}), request, f"budgets-{month:%Y-%m}")

    @extend_schema(operation_id="ledger_budget_set", request=Input, responses={200: Output})
    def put(self, request: Request) -> Response:
        budget = _plan_put(request=request, serializer=self.Input, write=budget_set, field="budget")
        return Response(self.Output(budget).data)


class RevenueView(APIView):
    """GET: the revenue of a period; PUT: set a business line's revenue (finance and admin)."""

    permission_classes = [SeesMoney]
    renderer_classes = RENDERERS

    class Input(serializers.Serializer):
        class Meta:
            ref_name = "LedgerRevenueIn"

        business_line = serializers.CharField(max_length=256)
        month = serializers.CharField(help_text="YYYY-MM")
        amount = serializers.DecimalField(max_digits=20, decimal_places=2, min_value=0)
        currency = serializers.ChoiceField(choices=Currency.choices, default=Currency.CNY)

    class Output(serializers.Serializer):
        class Meta:
            ref_name = "LedgerRevenue"

        business_line = serializers.CharField()
        month = serializers.DateField(format="%Y-%m")
        amount = money()
        currency = serializers.CharField()
        entered_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="ledger_revenue",
        parameters=[PERIOD, CSV_FORMAT],
        responses={200: rows_of(Output, "LedgerRevenuePage")},
    )
    def get(self, request: Request) -> Response:
        month = month_param(request)
        data = self.Output(Revenue.objects.filter(month=month), many=True).data
        return as_download(Response({"rows": data}), request, f"revenue-{month:%Y-%m}")

    @extend_schema(operation_id="ledger_revenue_set", request=Input, responses={200: Output})
    def put(self, request: Request) -> Response:
        revenue = _plan_put(request=request, serializer=self.Input, write=revenue_set, field="revenue")
        return Response(self.Output(revenue).data)
