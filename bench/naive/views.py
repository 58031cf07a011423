"""POST /bench/naive/records: the same {"records": [...]} body, through a ModelSerializer, saved
row by row (one INSERT a record). POST /bench/naive/records-bulk: the same validation, saved with
one `bulk_create` a request, the first thing a Django developer would reach for next."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.authentication import CollectorKeyAuthentication
from apps.ingest.api.views import IsCollector
from bench.naive.models import NaiveRecord
from wire.contract import TOKEN_FIELDS


class TokensSerializer(serializers.ModelSerializer):
    class Meta:
        model = NaiveRecord
        fields = TOKEN_FIELDS  # the record's token counts


class OutcomeSerializer(serializers.ModelSerializer):
    class Meta:
        model = NaiveRecord
        fields = ("status", "finish_reason")


class TimingSerializer(serializers.ModelSerializer):
    class Meta:
        model = NaiveRecord
        fields = ("queued", "ttft", "prefill", "decode", "e2e")


class NaiveRecordSerializer(serializers.ModelSerializer):
    # The nested objects of the record map onto flat columns of the same row.
    tokens = TokensSerializer(source="*")
    outcome = OutcomeSerializer(source="*")
    timing = TimingSerializer(source="*", required=False)
    dims = serializers.DictField(child=serializers.CharField(max_length=256, allow_blank=True), required=False)

    class Meta:
        model = NaiveRecord
        fields = (
            "record_id",
            "ts",
            "model",
            "model_version",
            "endpoint",
            "dims",
            "tokens",
            "outcome",
            "timing",
            "attempt",
            "retry_of",
            "prompt_hash",
            "quality_tier",
        )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, str] = {}
        get = attrs.get
        if get("prompt_cached", 0) > attrs["prompt"]:
            errors["prompt_cached"] = "must be <= tokens.prompt"
        if get("system", 0) + get("tool", 0) > attrs["prompt"]:
            errors["system"] = "tokens.system + tokens.tool must be <= tokens.prompt"
        if get("structural", 0) > attrs["completion"]:
            errors["structural"] = "must be <= tokens.completion"
        if get("draft_accepted", 0) > get("draft", 0):
            errors["draft_accepted"] = "must be <= tokens.draft"
        now = timezone.now()
        if attrs["ts"] > now + timedelta(hours=24):
            errors["ts"] = "must be at most 24 h in the future"
        elif attrs["ts"] < now - timedelta(days=settings.INGEST_MAX_AGE_DAYS):
            errors["ts"] = "too old"
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class NaiveRecordsView(APIView):
    authentication_classes = [CollectorKeyAuthentication]
    permission_classes = [IsCollector]

    def post(self, request: Request) -> Response:
        serializer = NaiveRecordSerializer(data=request.data.get("records"), many=True)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            saved = self.store(serializer, request.auth)
        return Response({"accepted": len(saved), "duplicates": 0, "rejected": []})

    def store(self, serializer: NaiveRecordSerializer, source: Any) -> list[Any]:
        return serializer.save(source=source)  # ListSerializer.create: one INSERT a record


class NaiveBulkRecordsView(NaiveRecordsView):
    """The same validation, the rows stored by one bulk_create."""

    def store(self, serializer: NaiveRecordSerializer, source: Any) -> list[Any]:
        rows = [NaiveRecord(**attrs, source=source) for attrs in serializer.validated_data]
        return NaiveRecord.objects.bulk_create(rows)  # one multi-row INSERT a batch of rows
