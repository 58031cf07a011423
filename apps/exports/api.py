"""The exports' API: a FOCUS CSV of a billing period (GET /api/v1/exports/focus)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.views import APIView

from apps.exports.focus_versions import DATASETS, DEFAULT_VERSION, VERSIONS, FocusChoiceError, focus_export
from apps.ledger.api.common import SeesMoneyOfLines, lines_of, month_param
from apps.ledger.api.views import PERIOD, RENDERERS

VERSION = OpenApiParameter("focus_version", str, enum=list(VERSIONS), description=f"default {DEFAULT_VERSION}")
DATASET = OpenApiParameter(
    "dataset", str, enum=list(DATASETS), description="default cost-and-usage; invoice-detail: 1.4, unscoped users"
)
SCOPED_INVOICES = "Invoice Detail holds whole supplier bills: it is for users who see every business line"


class FocusExportView(APIView):
    """FOCUS CSV of a billing period: FOCUS 1.4 by default (`focus_version=1.2` for 1.2), the
    cost and usage dataset (one row per priced part of each expense line; see docs/ledger.md)
    or, with `dataset=invoice-detail`, the supplier bills as FOCUS 1.4 Invoice Detail. Finance
    and admin; a user scoped to some business lines gets their cost centres' rows only, and no
    Invoice Detail."""

    permission_classes = [SeesMoneyOfLines]
    renderer_classes = RENDERERS  # errors as JSON; `Accept: text/csv` accepted

    @extend_schema(
        operation_id="exports_focus",
        parameters=[PERIOD, VERSION, DATASET],
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        month = month_param(request)
        version = request.query_params.get("focus_version", DEFAULT_VERSION)
        dataset = request.query_params.get("dataset", DATASETS[0])
        lines = lines_of(request)
        if dataset == "invoice-detail" and lines is not None:
            raise exceptions.PermissionDenied(SCOPED_INVOICES)
        try:
            rows = focus_export(month=month, version=version, dataset=dataset, business_lines=lines)
        except FocusChoiceError as exc:
            field = "dataset" if "dataset" in str(exc) else "focus_version"
            raise exceptions.ValidationError({field: [str(exc)]}) from exc
        response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
        name = "focus" if dataset == DATASETS[0] else f"focus-{dataset}"
        response["Content-Disposition"] = f'attachment; filename="{name}-{version}-{month:%Y-%m}.csv"'
        return response


urlpatterns = [
    path("exports/focus", FocusExportView.as_view(), name="exports-focus"),
]
