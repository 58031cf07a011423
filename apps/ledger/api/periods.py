"""Periods and findings over HTTP.

Closing is for finance and admin, reopening for admin only. Engineers may read periods."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.ledger.api.common import (
    IsAdmin,
    SeesLedger,
    SeesMoney,
    as_download,
    month_param,
    rows_of,
)
from apps.ledger.api.views import CSV_FORMAT, PERIOD, RENDERERS
from apps.ledger.models import Finding
from apps.ledger.selectors import periods_status
from apps.ledger.services.periods import PeriodError, parse_month, period_close, period_reopen


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
