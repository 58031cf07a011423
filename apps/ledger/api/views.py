"""Ledger reports over HTTP: trial balance, the account x cost centre x month matrix, journal
lines and the usage behind them, budget vs actual, the chart. Every table also renders as CSV
(`?format=csv`). Money is for finance and admin; engineers get the same tables in tokens."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.utils.dateparse import parse_date
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.replica import replica_view
from apps.ingest.api.params import page_limit
from apps.ledger.api.common import (
    CSVRenderer,
    MoneyAware,
    SeesLedgerOfLines,
    SeesMoneyOfLines,
    as_download,
    lines_of,
    money,
    month_param,
    rows_of,
    scope_note,
    sees_money,
)
from apps.ledger.models import Account, JournalLine
from apps.ledger.selectors import LineFilter, journal_lines, ledger_matrix, line_usage, trial_balance

PERIOD = OpenApiParameter("period", str, required=True, description="A month, YYYY-MM.")
CSV_FORMAT = OpenApiParameter("format", str, enum=["json", "csv"], description="csv: the table as a CSV download.")
RENDERERS = [JSONRenderer, CSVRenderer]


@replica_view
class TrialBalanceView(APIView):
    """Per currency (the functional one; a supplier bill's own if one was posted in another),
    every account's debits and credits posted in the period, and what of them was priced in
    another currency (`originals`, as priced); the totals are equal (each entry balances).
    Finance and admin; a user scoped to some business lines gets their cost centres' lines
    only (still balanced: accrual credits the payable per cost centre), and the answer names
    them."""

    permission_classes = [SeesMoneyOfLines]
    renderer_classes = RENDERERS

    class AccountOut(serializers.Serializer):
        code = serializers.CharField()
        name = serializers.CharField()
        kind = serializers.CharField()
        debits = money()
        credits = money()
        balance = money()
        originals = serializers.DictField(
            child=money(),
            help_text="Per currency the account's converted lines were priced in: their net as priced.",
        )

    class CurrencyOut(serializers.Serializer):
        currency = serializers.CharField()
        accounts = serializers.ListField(child=serializers.DictField())
        debits = money()
        credits = money()
        balanced = serializers.BooleanField()

    class Output(serializers.Serializer):
        class Meta:
            ref_name = "LedgerTrialBalance"

        period = serializers.CharField()
        status = serializers.CharField()
        currencies = serializers.ListField(child=serializers.DictField())
        rows = serializers.ListField(child=serializers.DictField(), help_text="The same, flat (the CSV rows).")

    @extend_schema(operation_id="ledger_trial_balance", parameters=[PERIOD, CSV_FORMAT], responses={200: Output})
    def get(self, request: Request) -> Response:
        month = month_param(request)
        balance = trial_balance(month=month, business_lines=lines_of(request))
        books = []
        for book in balance["currencies"]:
            out = self.CurrencyOut(book).data
            out["accounts"] = self.AccountOut(book["accounts"], many=True).data
            books.append(out)
        rows = [{"currency": b["currency"], **a} for b in books for a in b["accounts"]]
        data = {"period": balance["period"], "status": balance["status"], "currencies": books, "rows": rows}
        data |= scope_note(lines_of(request))
        return as_download(Response(data), request, f"trial-balance-{month:%Y-%m}")


@replica_view
class MatrixView(APIView):
    """Net amount and tokens per month x account x cost centre (expense accounts; `kind=all`
    adds the payable). Engineers get tokens only."""

    permission_classes = [SeesLedgerOfLines]
    renderer_classes = RENDERERS

    class Output(MoneyAware):
        class Meta:
            ref_name = "LedgerMatrixRow"

        money_fields = ("amount", "debits", "credits")
        month = serializers.CharField()
        account = serializers.CharField()
        account_name = serializers.CharField()
        cost_centre = serializers.CharField()
        currency = serializers.CharField()
        amount = money()
        debits = money()
        credits = money()
        tokens = serializers.IntegerField()

    @extend_schema(
        operation_id="ledger_matrix",
        parameters=[
            OpenApiParameter("from", str, required=True, description="First month, YYYY-MM."),
            OpenApiParameter("to", str, description="Last month (included), YYYY-MM; default `from`."),
            OpenApiParameter("kind", str, enum=["expense", "all"]),
            CSV_FORMAT,
        ],
        responses={200: rows_of(Output, "LedgerMatrixPage")},
    )
    def get(self, request: Request) -> Response:
        start = month_param(request, "from")
        end = month_param(request, "to", default=start)
        if end < start or (end.year - start.year) * 12 + end.month - start.month > 36:
            raise exceptions.ValidationError({"to": ["from <= to, at most 36 months apart"]})
        kind = None if request.query_params.get("kind") == "all" else Account.Kind.EXPENSE
        rows = ledger_matrix(start=start, end=end, kind=kind, business_lines=lines_of(request))
        data = self.Output(rows, many=True, context={"money": sees_money(request)}).data
        return as_download(Response({"rows": data}), request, f"ledger-matrix-{start:%Y-%m}-{end:%Y-%m}")


@replica_view
class JournalView(APIView):
    """Journal lines posted in a period, each with what it was booked from (`basis`: reasons,
    price versions, pools, mapping rule revisions, windows, the exact amount). Engineers get
    tokens only."""

    permission_classes = [SeesLedgerOfLines]
    renderer_classes = RENDERERS

    class Output(MoneyAware):
        class Meta:
            ref_name = "LedgerJournalLine"

        money_fields = ("debit", "credit", "exact")
        id = serializers.IntegerField()
        entry = serializers.IntegerField(source="entry_id")
        kind = serializers.CharField(source="entry.kind")
        period = serializers.DateField(source="period_id", format="%Y-%m")
        day = serializers.DateField()
        adjusts = serializers.DateField(source="entry.adjusts", format="%Y-%m", allow_null=True)
        account = serializers.CharField(source="account.code")
        cost_centre = serializers.CharField()
        model = serializers.CharField(allow_null=True)
        pool = serializers.CharField(source="pool.name", allow_null=True, default=None)
        currency = serializers.CharField()
        debit = money()
        credit = money()
        exact = serializers.CharField(source="basis.exact", default=None)
        tokens = serializers.IntegerField()
        basis = serializers.SerializerMethodField()
        usage = serializers.SerializerMethodField()

        def get_basis(self, line: JournalLine) -> dict[str, Any]:
            return {k: v for k, v in line.basis.items() if k != "exact"}

        def get_usage(self, line: JournalLine) -> str:
            return f"/api/v1/ledger/journal/{line.pk}/usage"

    @extend_schema(
        operation_id="ledger_journal",
        parameters=[
            PERIOD,
            OpenApiParameter("account", str, description="Account code."),
            OpenApiParameter("cost_centre", str),
            OpenApiParameter("day", OpenApiTypes.DATE),
            OpenApiParameter("model", str),
            OpenApiParameter("kind", str, enum=["accrual", "adjustment"]),
            OpenApiParameter("limit", int, description="1..10000, default 1000."),
            OpenApiParameter("offset", int),
            CSV_FORMAT,
        ],
        responses={200: rows_of(Output, "LedgerJournalPage", next_offset=serializers.IntegerField(allow_null=True))},
    )
    def get(self, request: Request) -> Response:
        month = month_param(request)
        day = request.query_params.get("day")
        flt = LineFilter(
            month=month,
            account=request.query_params.get("account"),
            cost_centre=request.query_params.get("cost_centre"),
            day=parse_date(day) if day else None,
            model=request.query_params.get("model"),
            kind=request.query_params.get("kind"),
        )
        offset = request.query_params.get("offset", "0")
        if not offset.isdigit():
            raise exceptions.ValidationError({"offset": ["a non-negative integer"]})
        limit = page_limit(request, default=1000, maximum=10000)
        found = journal_lines(flt=flt)
        if (scope := lines_of(request)) is not None:
            found = found.filter(cost_centre__in=scope)
        lines = found[int(offset) : int(offset) + limit]
        data = self.Output(lines, many=True, context={"money": sees_money(request)}).data
        nxt = int(offset) + limit if len(data) == limit else None
        return as_download(Response({"rows": data, "next_offset": nxt}), request, f"journal-{month:%Y-%m}")


@replica_view
class LineUsageView(APIView):
    """The priced hourly rows behind a journal line (the pool-hours for idle capacity, each with
    the line's share of its idle under the idle policy): hour,
    source, dims, class.reason, component, tokens, cost, price version or pool, the rule sets
    that classified them, the mapping rule that books them, and a link to their records."""

    permission_classes = [SeesLedgerOfLines]
    renderer_classes = RENDERERS
    MONEY = ("cost", "pool_cost", "allocated", "idle", "share")

    @extend_schema(operation_id="ledger_line_usage", parameters=[CSV_FORMAT], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        visible = JournalLine.objects.select_related("account", "model")
        if (scope := lines_of(request)) is not None:
            visible = visible.filter(cost_centre__in=scope)  # another line's is not found
        line = get_object_or_404(visible, pk=pk)
        usage = line_usage(line=line)
        rows = usage["rows"]
        if not sees_money(request):
            rows = [{k: v for k, v in row.items() if k not in self.MONEY} for row in rows]
        rows = [{k: str(v) if k in self.MONEY else v for k, v in row.items()} for row in rows]
        return as_download(Response(usage | {"rows": rows}), request, f"journal-line-{pk}-usage")


class AccountsView(APIView):
    """The chart of accounts (edited in the admin)."""

    permission_classes = [SeesLedgerOfLines]
    renderer_classes = RENDERERS

    class Output(serializers.ModelSerializer):
        class Meta:
            ref_name = "LedgerAccount"
            model = Account
            fields = ["code", "name", "kind", "role", "description", "active"]

    @extend_schema(
        operation_id="ledger_accounts", parameters=[CSV_FORMAT], responses={200: rows_of(Output, "LedgerAccountsPage")}
    )
    def get(self, request: Request) -> Response:
        data = self.Output(Account.objects.all(), many=True).data
        return as_download(Response({"rows": data}), request, "chart-of-accounts")
