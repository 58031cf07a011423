"""GET /api/v1/budgets/state: the budgets of the accounting month as the edge needs them to
hold hard budgets (wire/budgets.py polls it and caches the answer).

Collector keys only (`Authorization: Bearer cpk_…`): the serving middleware and the proxy ask
with the key they ship records with. A key limited to some business lines learns those lines'
budgets only, as it may write only their records."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.authentication import CollectorKeyAuthentication
from apps.common.buckets import iso_local, month_end, month_of
from apps.ingest.api.views import IsCollector
from apps.plans.budget_state import BudgetState, budget_states

CENT = Decimal("0.01")


def state_json(state: BudgetState) -> dict[str, Any]:
    """One budget as the edge reads it (wire/budgets.py Budget)."""
    return {
        "id": state.id,
        "business_line": state.business_line,
        "team": state.team,
        "caller": state.caller,
        "dim": state.dim,
        "value": state.value,
        "hard": state.hard,
        "spent": state.spent,
        "holds": state.holds,
        "currency": state.currency,
        "amount": None if state.amount is None else str(state.amount),
        "used_amount": str(state.used_amount.quantize(CENT)),
        "tokens": state.tokens,
        "used_tokens": state.used_tokens,
        "resets_at": iso_local(state.resets_at),
        "override_until": state.override_until.isoformat() if state.override_until else None,
    }


class BudgetOut(serializers.Serializer):
    class Meta:
        ref_name = "BudgetState"

    id = serializers.IntegerField()
    business_line = serializers.CharField()
    team = serializers.CharField(help_text="Empty: the whole business line.")
    caller = serializers.CharField(
        help_text="A caller of the attribution map (the records' caller dim): its requests only. Empty: every caller."
    )
    dim = serializers.CharField(
        help_text="A rollup dim (e.g. user): with value, the requests whose dims carry that value only. Empty: none."
    )
    value = serializers.CharField(help_text="The dim's value, e.g. u-42.")
    hard = serializers.BooleanField()
    spent = serializers.BooleanField()
    holds = serializers.BooleanField(help_text="Hard, spent and no active override: refuse new requests.")
    currency = serializers.CharField()
    amount = serializers.CharField(allow_null=True)
    used_amount = serializers.CharField()
    tokens = serializers.IntegerField(allow_null=True)
    used_tokens = serializers.IntegerField()
    resets_at = serializers.DateTimeField(help_text="The next accounting month's start, in the accounting zone.")
    override_until = serializers.DateTimeField(allow_null=True)


class BudgetStateView(APIView):
    """The month's budgets with what they used and whether each holds (hard, spent, no
    override). `holds` is what the edge acts on; the rest names the figures in its refusal."""

    # A person's login is authenticated only to be refused (403), as on every other API.
    authentication_classes = [CollectorKeyAuthentication, SessionAuthentication, BasicAuthentication]
    permission_classes = [IsCollector]

    class Output(serializers.Serializer):
        month = serializers.CharField()
        generated_at = serializers.DateTimeField()
        resets_at = serializers.DateTimeField()
        budgets = serializers.ListField(child=BudgetOut())

    @extend_schema(operation_id="budgets_state", responses={200: Output})
    def get(self, request: Request) -> Response:
        now = datetime.now(UTC)
        key = request.auth
        lines = list(key.business_lines) or None
        states = budget_states(now=now, business_lines=lines)
        month = month_of(now)
        return Response(
            {
                "month": f"{month:%Y-%m}",
                "generated_at": now.isoformat(),
                "resets_at": iso_local(month_end(month)),
                "budgets": [state_json(s) for s in states],
            }
        )
