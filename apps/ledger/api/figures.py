"""The headline figures over HTTP (apps/ledger/figures.py): a month's or any window's spend with
its parts and its tokens, as every page shows them. Money is for finance, admin and users granted
it; the others get the tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.ledger import figures
from apps.ledger.api.common import SeesLedgerOfLines, lines_of, money, scope_note, sees_money
from apps.ledger.services.accrual import month_window
from apps.ledger.services.periods import parse_month

MAX_WINDOW_DAYS = 400


class FiguresView(APIView):
    """Spend (total, tokens' cost, idle capacity, unassigned tokens' cost, booked and pending, and
    what waits for an exchange rate) and tokens (classified, priced) of a month (`period`) or of
    [`from`, `to`) (instants with an offset), for the reader's business lines."""

    permission_classes = [SeesLedgerOfLines]

    class SpendOut(serializers.Serializer):
        currency = serializers.CharField()
        total = money()
        usage = money()
        idle = money()
        unassigned = money()
        pending = money(help_text="Of the total: priced since the journal last booked those days.")
        unconverted = serializers.DictField(child=money())

    class TokensOut(serializers.Serializer):
        total = serializers.IntegerField()
        priced = serializers.IntegerField()

    class Output(serializers.Serializer):
        class Meta:
            ref_name = "LedgerFigures"

        start = serializers.DateTimeField()
        end = serializers.DateTimeField()
        spend = serializers.DictField(allow_null=True, help_text="Absent (null) without money rights.")
        tokens = serializers.DictField()

    @extend_schema(
        operation_id="ledger_figures",
        parameters=[
            OpenApiParameter("period", str, description="A month, YYYY-MM (its window in the books' zone)."),
            OpenApiParameter("from", str, description="Or a window: its start, ISO 8601 with an offset."),
            OpenApiParameter("to", str, description="Its end (excluded)."),
        ],
        responses={200: Output},
    )
    def get(self, request: Request) -> Response:
        start, end = _window(request)
        lines = lines_of(request)
        out: dict[str, Any] = {"start": start, "end": end, "spend": None}
        if sees_money(request):
            spent = figures.spend(start=start, end=end, lines=lines)
            out["spend"] = self.SpendOut({**vars(spent), "total": spent.total}).data
        count = figures.tokens(start=start, end=end, lines=lines)
        out["tokens"] = self.TokensOut(vars(count)).data
        return Response({**self.Output(out).data, **scope_note(lines)})


def _window(request: Request) -> tuple[datetime, datetime]:
    params = request.query_params
    if params.get("period"):
        window = month_window(
            parse_month(params["period"], error=lambda m: exceptions.ValidationError({"period": [m]}))
        )
        return window.start, window.end
    found = [parse_datetime(params.get(name, "").replace(" ", "+")) for name in ("from", "to")]
    start, end = found
    if start is None or end is None or start.tzinfo is None or end.tzinfo is None:
        raise exceptions.ValidationError({"period": ["a month YYYY-MM, or from and to: instants with an offset"]})
    if not start < end or (end - start).days > MAX_WINDOW_DAYS:
        raise exceptions.ValidationError({"to": [f"from < to, at most {MAX_WINDOW_DAYS} days apart"]})
    return start, end
