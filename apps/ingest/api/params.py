"""Query parameters shared by the read endpoints: times, page sizes, dims, usage windows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions
from rest_framework.request import Request

from apps.ingest.selectors import GRANULARITIES


def parse_time(request: Request, name: str, default: datetime) -> datetime:
    raw = request.query_params.get(name)
    if not raw:
        return default
    value = parse_datetime(raw) if "T" in raw or " " in raw else parse_datetime(f"{raw}T00:00:00+00:00")
    if value is None:
        raise exceptions.ValidationError({name: [f"{raw!r} is not an RFC 3339 time or a date."]})
    try:
        # In UTC: PostgreSQL refuses offsets past 15:59 that Python reads (+19:08).
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except OverflowError as exc:
        raise exceptions.ValidationError({name: [f"{raw!r} is out of range."]}) from exc


def page_limit(request: Request, default: int = 100, maximum: int = 1000) -> int:
    raw = request.query_params.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise exceptions.ValidationError({"limit": [f"must be an integer 1..{maximum}"]})
    return int(raw)


def dim_filters(request: Request) -> dict[str, str]:
    """`dims.<name>=value` parameters."""
    return {key[5:]: value for key, value in request.query_params.items() if key.startswith("dims.") and key[5:]}


@dataclass(frozen=True)
class UsageWindow:
    start: datetime
    end: datetime
    granularity: str
    group_by: list[str]
    dims: dict[str, str]

    def selector_args(self) -> dict[str, Any]:
        """The window as the usage selectors take it (start, end, granularity, group_by, dims)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def usage_window(request: Request, *, groups: Iterable[str]) -> UsageWindow:
    """from, to (required), granularity, group_by (these groups or a rollup dim), dims.<name>."""
    for required in ("from", "to"):
        if not request.query_params.get(required):
            raise exceptions.ValidationError({required: ["required"]})
    now = datetime.now(UTC)
    granularity = request.query_params.get("granularity", "day")
    if granularity not in GRANULARITIES:
        raise exceptions.ValidationError({"granularity": [f"must be one of {', '.join(GRANULARITIES)}"]})
    allowed = (*groups, *settings.ROLLUP_DIMS)
    group_by = [g.strip() for g in request.query_params.get("group_by", "").split(",") if g.strip()]
    unknown = [g for g in group_by if g not in allowed]
    if unknown or len(set(group_by)) != len(group_by):
        raise exceptions.ValidationError(
            {"group_by": [f"unknown or repeated {unknown}; allowed: {', '.join(allowed)}"]}
        )
    dims = dim_filters(request)
    not_kept = [d for d in dims if d not in settings.ROLLUP_DIMS]
    if not_kept:
        raise exceptions.ValidationError({"dims": [f"{not_kept} are not kept in rollups"]})
    return UsageWindow(parse_time(request, "from", now), parse_time(request, "to", now), granularity, group_by, dims)


def usage_parameters(groups: Iterable[str]) -> list[OpenApiParameter]:
    """The OpenAPI description of the parameters usage_window reads."""
    return [
        OpenApiParameter("from", OpenApiTypes.DATETIME, required=True),
        OpenApiParameter("to", OpenApiTypes.DATETIME, required=True),
        OpenApiParameter("granularity", str, enum=list(GRANULARITIES), description="Default day."),
        OpenApiParameter(
            "group_by",
            str,
            description=f"Comma-separated: {', '.join(groups)}, or a rollup dim "
            "(COSTPLATFORM_ROLLUP_DIMS: business_line, team, caller, project, feature, step, env by default).",
        ),
        OpenApiParameter("dims.<name>", str, description="Filter on a rollup dim."),
    ]
