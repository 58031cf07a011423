"""Rules over HTTP: rule sets and rules (usage per class and reason is pricing's: apps.pricing.api)."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.roles import IsReader
from apps.accounts.scopes import RulesEditor
from apps.classification.engine import BUILTIN_RULES, COMPONENT_GROUPS, COMPONENTS
from apps.classification.models import Rule, RuleSet
from apps.classification.services import (
    RuleSetNotEditable,
    rule_add,
    ruleset_activate,
    ruleset_draft_create,
    ruleset_try,
)
from apps.ingest.api.params import parse_time


class RuleOut(serializers.ModelSerializer):
    class Meta:
        model = Rule
        fields = ["id", "position", "name", "action", "expression", "components", "target", "builtin"]


class RuleSetOut(serializers.ModelSerializer):
    rules = RuleOut(many=True, read_only=True)

    class Meta:
        model = RuleSet
        fields = ["version", "name", "status", "created_at", "activated_at", "rules"]


class RuleSetsView(APIView):
    """GET: every rule set with its rules. POST: a new draft copied from the active set."""

    def get_permissions(self) -> list[BasePermission]:
        return [IsReader()] if self.request.method == "GET" else [RulesEditor()]

    @extend_schema(operation_id="rulesets_list", responses={200: RuleSetOut(many=True)})
    def get(self, request: Request) -> Response:
        return Response(RuleSetOut(RuleSet.objects.prefetch_related("rules"), many=True).data)

    class DraftIn(serializers.Serializer):
        name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")

    @extend_schema(
        operation_id="rulesets_draft",
        request=inline_serializer("RuleSetDraftIn", {"name": serializers.CharField(required=False, max_length=200)}),
        responses={201: RuleSetOut},
        description=(
            "A new draft holding a copy of the active rule set's rules (engineer or admin, not scoped to "
            "some business lines)."
        ),
    )
    def post(self, request: Request) -> Response:
        data = self.DraftIn(data=request.data)  # a body that is not an object is a 400, not a 500
        data.is_valid(raise_exception=True)
        draft = ruleset_draft_create(user=request.user, name=data.validated_data["name"])
        return Response(RuleSetOut(draft).data, status=201)


class RuleIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    action = serializers.ChoiceField(choices=Rule.Action.choices, default=Rule.Action.MOVE)
    expression = serializers.CharField(required=False, allow_blank=True, default="")
    components = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text=f"Comma-separated: {', '.join((*COMPONENTS, *COMPONENT_GROUPS))}",
    )
    target = serializers.CharField(required=False, allow_blank=True, default="", help_text="class.reason")
    builtin = serializers.ChoiceField(choices=BUILTIN_RULES, required=False, allow_blank=True, default="")


def _draft(version: int) -> RuleSet:
    return get_object_or_404(RuleSet, version=version)


class RulesView(APIView):
    """POST: add a rule to a draft. A rule that does not parse or type-check is refused with
    the line and column of the error."""

    permission_classes = [RulesEditor]

    @extend_schema(operation_id="rules_add", request=RuleIn, responses={201: RuleOut})
    def post(self, request: Request, version: int) -> Response:
        data = RuleIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            rule = rule_add(ruleset=_draft(version), **data.validated_data)
        except RuleSetNotEditable as exc:
            raise exceptions.ValidationError({"ruleset": [str(exc)]}) from exc
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from exc
        return Response(RuleOut(rule).data, status=201)


class RuleSetActivateView(APIView):
    permission_classes = [RulesEditor]

    @extend_schema(operation_id="rulesets_activate", request=None, responses={200: RuleSetOut})
    def post(self, request: Request, version: int) -> Response:
        try:
            ruleset = ruleset_activate(ruleset=_draft(version))
        except RuleSetNotEditable as exc:
            raise exceptions.ValidationError({"ruleset": [str(exc)]}) from exc
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from exc
        return Response(RuleSetOut(ruleset).data)


class RuleSetTryView(APIView):
    """What would move if this rule set replaced the active one, over recent records."""

    permission_classes = [RulesEditor]  # it sees every business line: totals over all of them

    @extend_schema(
        operation_id="rulesets_try",
        summary="Tokens that would move between class.reasons if this rule set were active",
        parameters=[
            OpenApiParameter("from", OpenApiTypes.DATETIME, description="Default: 24 h before `to`."),
            OpenApiParameter("to", OpenApiTypes.DATETIME, description="Default: now."),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, version: int) -> Response:
        end = parse_time(request, "to", timezone.now())
        start = parse_time(request, "from", end - timedelta(days=1))
        moves = ruleset_try(ruleset=_draft(version), start=start, end=end)
        return Response({"from": start, "to": end, "moves": [m._asdict() for m in moves]})
