"""HTTP surface of ingest: POST/GET /api/v1/records, GET /api/v1/usage, GET /api/v1/rejections."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.authentication import CollectorKeyAuthentication
from apps.accounts.models import CollectorKey
from apps.accounts.roles import IsReader
from apps.accounts.scopes import SeesAllLines, business_lines_of
from apps.common.replica import replica_view
from apps.ingest.api.body import PayloadTooLarge, body_inflate, body_read, charset_check
from apps.ingest.api.params import dim_filters, page_limit, parse_time, usage_parameters, usage_window
from apps.ingest.contract import STATUSES, BodyError, TooManyRecords
from apps.ingest.ratelimit import RECORDS, REQUESTS, RateLimited, rate_take
from apps.ingest.retention import records_gone
from apps.ingest.selectors import (
    USAGE_GROUPS,
    InvalidCursor,
    RecordFilter,
    records_list,
    rejections_list,
    usage_series,
)
from apps.ingest.services import IngestResult, body_refuse

JSON_TYPES = {"application/json"}
NDJSON_TYPES = {"application/x-ndjson", "application/ndjson", "application/jsonl"}


class IsCollector(BasePermission):
    message = "Sending records needs a collector key: Authorization: Bearer <key>."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, CollectorKey)


class IsPerson(BasePermission):
    """A logged-in person, not a collector key (the role and business-line scope come next)."""

    message = "Reading needs a user login (session or basic auth), not a collector key."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and not isinstance(request.auth, CollectorKey))


class TokensOut(serializers.Serializer):
    prompt = serializers.IntegerField()
    prompt_cached = serializers.IntegerField()
    completion = serializers.IntegerField()
    system = serializers.IntegerField()
    tool = serializers.IntegerField()
    structural = serializers.IntegerField()
    padding = serializers.IntegerField()
    draft = serializers.IntegerField()
    draft_accepted = serializers.IntegerField()
    recomputed = serializers.IntegerField()
    reasoning = serializers.IntegerField()
    prompt_cache_write = serializers.IntegerField()


class RecordOut(serializers.Serializer):
    record_id = serializers.CharField()
    ts = serializers.DateTimeField()
    source = serializers.CharField(source="source.name")
    model = serializers.CharField(source="model.name")
    model_version = serializers.CharField(source="model.version")
    endpoint = serializers.CharField(source="get_endpoint_display", allow_null=True)
    dims = serializers.DictField(source="dims.dims", child=serializers.CharField())
    tokens = serializers.SerializerMethodField()
    outcome = serializers.SerializerMethodField()
    timing = serializers.SerializerMethodField()
    attempt = serializers.IntegerField()
    retry_of = serializers.CharField(allow_null=True)
    prompt_hash = serializers.SerializerMethodField()
    quality_tier = serializers.CharField(source="get_quality_tier_display", allow_null=True)

    def get_tokens(self, record: Any) -> dict[str, int]:
        return TokensOut(record).data

    def get_outcome(self, record: Any) -> dict[str, str | None]:
        finish = record.get_finish_reason_display() if record.finish_reason is not None else None
        return {"status": record.get_status_display(), "finish_reason": finish}

    def get_timing(self, record: Any) -> dict[str, int | None]:
        return {name: getattr(record, name) for name in ("queued", "ttft", "prefill", "decode", "e2e")}

    def get_prompt_hash(self, record: Any) -> str | None:
        return bytes(record.prompt_hash).hex() if record.prompt_hash is not None else None


@replica_view
class RecordsView(APIView):
    """POST: collectors send records (collector key). GET: people list records (login).

    What stores a batch is given where the view is mounted (apps.pipeline.urls: ingest with
    classification composed in); ingest itself does not know the later stages."""

    authentication_classes = [CollectorKeyAuthentication, SessionAuthentication, BasicAuthentication]
    ingest: Callable[..., IngestResult] | None = None

    class IngestOut(serializers.Serializer):
        accepted = serializers.IntegerField()
        duplicates = serializers.IntegerField()
        rejected = serializers.ListField(
            child=inline_serializer(
                "RejectedRecord",
                {
                    "index": serializers.IntegerField(),
                    "record_id": serializers.CharField(),
                    "errors": serializers.DictField(child=serializers.ListField(child=serializers.CharField())),
                },
            )
        )

    def get_permissions(self) -> list[BasePermission]:
        return [IsCollector()] if self.request.method == "POST" else [IsPerson(), IsReader()]

    def _ingest(self) -> Callable[..., IngestResult]:
        if self.ingest is None:
            raise ImproperlyConfigured("RecordsView needs ingest=...: the app composing the stages mounts it")
        return self.ingest

    @extend_schema(
        operation_id="records_ingest",
        summary="Send token records",
        description=(
            'A batch of token records v1 (docs/record-v1.schema.json) as `{"records": [...]}` '
            "(application/json) or one record per line (application/x-ndjson), optionally "
            "`Content-Encoding: gzip`. `tokens.prompt` counts ALL prompt tokens, cached ones included "
            "(inclusive convention); `tokens.prompt_cached` is the cached part. Valid records are stored "
            "even when others are rejected, records beyond the key's limits too (a business line it may "
            "not write, a reconciliation record it may not send, older than its backdating window: "
            "docs/ingest.md); a record already stored (same source, record_id and ts) "
            "counts as a duplicate and changes nothing. 413 over the size limit, 415 for other content "
            "types or a charset other than UTF-8, 400 when the body cannot be read as a batch (not UTF-8, not JSON, "
            "nested too deep, broken gzip; such a body is charged to the key's records rate and kept, its "
            "first 64 KiB), 408 when the body takes longer than the body timeout to arrive, "
            "429 with Retry-After over the key's "
            "rate limit (requests or records per second; nothing of that request is stored)."
        ),
        request={"application/json": OpenApiTypes.OBJECT, "application/x-ndjson": OpenApiTypes.STR},
        responses={200: IngestOut},
    )
    def post(self, request: Request) -> Response:
        _rate_take(request.auth, REQUESTS, 1)
        media = request.content_type.split(";")[0].strip().lower()
        if media not in JSON_TYPES | NDJSON_TYPES:
            raise exceptions.UnsupportedMediaType(
                media, f"Content-Type {media!r}: send application/json or application/x-ndjson."
            )
        charset_check(request._request)
        key = request.auth

        def admit(count: int) -> None:
            _rate_take(key, RECORDS, count)

        body = _body(request, key, admit)
        try:
            result = self._ingest()(key=key, body=body, ndjson=media in NDJSON_TYPES, admit=admit)
        except BodyError as exc:
            raise exceptions.ParseError(str(exc)) from exc
        except TooManyRecords as exc:
            raise PayloadTooLarge(str(exc)) from exc
        rejected = [{"index": r.index, "record_id": r.record_id, "errors": r.errors} for r in result.rejected]
        return Response({"accepted": result.accepted, "duplicates": result.duplicates, "rejected": rejected})

    @extend_schema(
        operation_id="records_list",
        summary="List token records, newest first",
        parameters=[
            OpenApiParameter("from", OpenApiTypes.DATETIME, description="Start (inclusive); default 24 h ago."),
            OpenApiParameter("to", OpenApiTypes.DATETIME, description="End (exclusive); default now."),
            OpenApiParameter("model", str),
            OpenApiParameter("status", str, enum=list(STATUSES)),
            OpenApiParameter("source", str, description="Collector key name."),
            OpenApiParameter("dims.<name>", str, description="Any dim, e.g. dims.business_line=support."),
            OpenApiParameter("limit", int, description="Page size, 1..1000 (default 100)."),
            OpenApiParameter("cursor", str, description="The `next` value of the previous page."),
        ],
        responses={
            200: inline_serializer(
                "RecordPage",
                {
                    "results": RecordOut(many=True),
                    "next": serializers.CharField(allow_null=True),
                    "dropped": serializers.ListField(
                        child=serializers.CharField(),
                        help_text="Months (YYYY-MM) of the window whose records retention dropped: they are "
                        "not listed; their usage is still in /api/v1/usage.",
                    ),
                },
            )
        },
    )
    def get(self, request: Request) -> Response:
        now = datetime.now(UTC)
        flt = RecordFilter(
            start=parse_time(request, "from", now - timedelta(hours=24)),
            end=parse_time(request, "to", now + timedelta(seconds=1)),
            model=request.query_params.get("model") or None,
            status=_status_code(request.query_params.get("status")),
            source_id=_source_id(request.query_params.get("source")),
            dims=dim_filters(request),
            business_lines=business_lines_of(request.user),
        )
        try:
            rows, nxt = records_list(flt=flt, limit=page_limit(request), after=request.query_params.get("cursor"))
        except InvalidCursor as exc:
            raise exceptions.ValidationError({"cursor": [str(exc)]}) from exc
        dropped = [f"{m:%Y-%m}" for m in records_gone(start=flt.start, end=flt.end)] if flt.end > flt.start else []
        return Response({"results": RecordOut(rows, many=True).data, "next": nxt, "dropped": dropped})


def _body(request: Request, key: CollectorKey, admit: Callable[[int], None]) -> bytes:
    """The request body, decompressed. Broken gzip is charged to the key and kept, as
    batch_ingest does with any other unreadable body."""
    raw = body_read(request._request)
    try:
        return body_inflate(request._request, raw)
    except exceptions.ParseError as exc:
        body_refuse(source_id=key.pk, body=raw, error=str(exc.detail), admit=admit)
        raise


def _rate_take(key: CollectorKey, kind: str, cost: int) -> None:
    try:
        rate_take(key=key, kind=kind, cost=cost)
    except RateLimited as exc:
        raise exceptions.Throttled(wait=exc.retry_after, detail=str(exc)) from exc


def _status_code(raw: str | None) -> int | None:
    if not raw:
        return None
    if raw not in STATUSES:
        raise exceptions.ValidationError({"status": [f"must be one of {', '.join(STATUSES)}"]})
    return STATUSES.index(raw)


def _source_id(name: str | None) -> int | None:
    if not name:
        return None
    key = CollectorKey.objects.filter(name=name).first()
    if key is None:
        raise exceptions.ValidationError({"source": [f"no collector key named {name!r}"]})
    return key.pk


@replica_view
class UsageView(APIView):
    permission_classes = [IsPerson, IsReader]

    @extend_schema(
        operation_id="usage",
        summary="Token sums per period and group, from the hourly rollups",
        parameters=usage_parameters(USAGE_GROUPS),
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        window = usage_window(request, groups=USAGE_GROUPS)
        rows = usage_series(**window.selector_args(), business_lines=business_lines_of(request.user))
        for row in rows:
            if "status" in row:
                row["status"] = STATUSES[row["status"]]
        return Response({"granularity": window.granularity, "group_by": window.group_by, "rows": rows})


class RejectionsView(APIView):
    # Rejected records are raw bodies of any business line.
    permission_classes = [IsPerson, IsReader, SeesAllLines]

    class RejectionOut(serializers.Serializer):
        id = serializers.IntegerField()
        source = serializers.CharField(source="source.name")
        received_at = serializers.DateTimeField()
        index = serializers.IntegerField(allow_null=True)
        record_id = serializers.CharField()
        errors = serializers.JSONField()
        raw = serializers.CharField()

    @extend_schema(
        operation_id="rejections_list",
        summary="Refused records (dead letters), newest first",
        parameters=[
            OpenApiParameter("source", str),
            OpenApiParameter("limit", int),
            OpenApiParameter("cursor", str),
        ],
        responses={
            200: inline_serializer(
                "RejectionPage",
                {"results": RejectionOut(many=True), "next": serializers.CharField(allow_null=True)},
            )
        },
    )
    def get(self, request: Request) -> Response:
        cursor = request.query_params.get("cursor")
        if cursor is not None and not cursor.isdigit():
            raise exceptions.ValidationError({"cursor": ["cursor is not one this API returned"]})
        rows, nxt = rejections_list(
            source_id=_source_id(request.query_params.get("source")),
            limit=page_limit(request),
            after=int(cursor) if cursor else None,
        )
        return Response(
            {
                "results": self.RejectionOut(rows, many=True).data,
                "next": str(nxt) if nxt is not None else None,
            }
        )
