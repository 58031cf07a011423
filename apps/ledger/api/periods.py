"""Periods, findings, budgets, revenue and the FOCUS export over HTTP.

Closing is for finance and admin, reopening for admin only; budgets and revenue are set by
finance (or admin). Engineers may read periods and token budgets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.ledger.api.common import (
    IsAdmin,
    MoneyAware,
    SeesLedger,
    SeesMoney,
    as_download,
    field_error,
    money,
    month_param,
    rows_of,
    sees_money,
)
from apps.ledger.api.views import CSV_FORMAT, PERIOD, RENDERERS
from apps.ledger.models import Budget, Finding, Revenue
from apps.ledger.selectors import periods_status
from apps.ledger.services.periods import PeriodError, parse_month, period_close, period_reopen
from apps.ledger.services.planning import PlanningError, budget_set, revenue_set
from apps.pricing.models import Currency


class PeriodsView(APIView):
    """The latest months: status, who closed them, how far accrual has booked, adjustments."""

    permission_classes = [SeesLedger]
    renderer_classes = RENDERERS

    @extend_schema(operation_id="ledger_periods", parameters=[CSV_FORMAT], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return as_download(Response({"rows": periods_status(months=24)}), request, "periods")


class PeriodCloseView(APIView):
    """Close a month (finance or admin): complete its journal, run the month-end checks and lock
    it. Answers with the totals per currency and the findings."""

    permission_classes = [SeesMoney]

    class Output(serializers.Serializer):
        class Meta:
            ref_name = "LedgerPeriodClosed"

        period = serializers.CharField()
        status = serializers.CharField()
        days_computed = serializers.IntegerField()
        totals = serializers.ListField(child=serializers.DictField())
        findings = serializers.ListField(child=serializers.DictField())

    @extend_schema(operation_id="ledger_period_close", request=None, responses={200: Output})
    def post(self, request: Request, month: str) -> Response:
        try:
            result = period_close(month=parse_month(month, error=exceptions.NotFound), user=request.user)
        except PeriodError as exc:
            raise exceptions.ValidationError({"period": [str(exc)]}) from exc
        totals = [{k: str(v) for k, v in vars(t).items()} for t in result.totals]
        return Response(
            {
                "period": month,
                "status": result.period.status,
                "days_computed": result.accrual.days_computed,
                "totals": totals,
                "findings": FindingsView.Output(result.findings, many=True).data,
            }
        )


class PeriodReopenView(APIView):
    """Reopen a closed month (admin only; the reason is recorded)."""

    permission_classes = [IsAdmin]

    class Input(serializers.Serializer):
        class Meta:
            ref_name = "LedgerPeriodReopen"

        reason = serializers.CharField(max_length=2000)

    @extend_schema(operation_id="ledger_period_reopen", request=Input, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, month: str) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            first = parse_month(month, error=exceptions.NotFound)
            period = period_reopen(month=first, user=request.user, reason=data.validated_data["reason"])
        except PeriodError as exc:
            raise exceptions.ValidationError({"period": [str(exc)]}) from exc
        except PermissionDenied as exc:
            raise exceptions.PermissionDenied(str(exc)) from exc
        return Response({"period": period.label, "status": period.status})


class FindingsView(APIView):
    """Month-end findings of a period (finance and admin)."""

    permission_classes = [SeesMoney]
    renderer_classes = RENDERERS

    class Output(serializers.ModelSerializer):
        period = serializers.DateField(format="%Y-%m")

        class Meta:
            ref_name = "LedgerFinding"
            model = Finding
            fields = [
                "id",
                "kind",
                "action",
                "period",
                "business_line",
                "figures",
                "message",
                "created_at",
                "delivered_at",
            ]

    @extend_schema(
        operation_id="ledger_findings",
        parameters=[PERIOD, CSV_FORMAT],
        responses={200: rows_of(Output, "LedgerFindingsPage")},
    )
    def get(self, request: Request) -> Response:
        month = month_param(request)
        data = self.Output(Finding.objects.filter(period=month), many=True).data
        return as_download(Response({"rows": data}), request, f"findings-{month:%Y-%m}")


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
