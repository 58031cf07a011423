"""The exports' API: the FOCUS CSV of a billing period (GET /api/v1/exports/focus)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from apps.exports.focus import focus_csv
from apps.ledger.api.common import SeesMoneyOfLines, lines_of, month_param
from apps.ledger.api.views import PERIOD, RENDERERS


class FocusExportView(APIView):
    """FOCUS 1.2 CSV of a billing period: one row per day x model x cost centre x account
    (see docs/ledger.md for the column rules). Finance and admin; a user scoped to some
    business lines gets their cost centres' rows only."""

    permission_classes = [SeesMoneyOfLines]
    renderer_classes = RENDERERS  # errors as JSON; `Accept: text/csv` accepted

    @extend_schema(operation_id="exports_focus", parameters=[PERIOD], responses={(200, "text/csv"): OpenApiTypes.STR})
    def get(self, request: Request) -> StreamingHttpResponse:
        month = month_param(request)
        rows = focus_csv(month=month, business_lines=lines_of(request))
        response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="focus-{month:%Y-%m}.csv"'
        return response


urlpatterns = [
    path("exports/focus", FocusExportView.as_view(), name="exports-focus"),
]
