"""Usage per class and reason with its cost over HTTP: the class rollup beside the cost rollup."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.roles import IsReader
from apps.accounts.scopes import business_lines_of, sees_money
from apps.common.replica import replica_view
from apps.ingest.api.params import usage_parameters, usage_window
from apps.pricing.selectors import CLASS_GROUPS, class_usage, unpriced_message, unpriced_models


@replica_view
class ClassUsageView(APIView):
    permission_classes = [IsReader]

    @extend_schema(
        operation_id="usage_classes",
        summary="Tokens and cost per class and reason, from the class and cost rollups",
        description=(
            "Rows per period and group. `cost` maps currency to amount (exact Decimal strings); tokens "
            "that are not priced (yet, or because the model has neither a price nor a cost pool) are "
            "counted in `unpriced_tokens` and named in `warnings`, never priced at 0."
        ),
        parameters=usage_parameters(CLASS_GROUPS),
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        window = usage_window(request, groups=CLASS_GROUPS)
        rows = class_usage(**window.selector_args(), business_lines=business_lines_of(request.user))
        money = sees_money(request.user)
        for row in rows:
            # never a float; none at all for readers without money (finance and admin, or granted)
            row["cost"] = {currency: str(amount) for currency, amount in row["cost"].items()} if money else {}
        unpriced = unpriced_models(start=window.start, end=window.end)
        return Response(
            {
                "granularity": window.granularity,
                "group_by": window.group_by,
                "rows": rows,
                "warnings": [unpriced_message(unpriced)] if unpriced else [],
            }
        )
