"""What the ledger's API views share: roles, the period parameter, money-aware output
serializers (engineers see tokens, not money) and a CSV renderer for every table."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from datetime import date
from decimal import Decimal
from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.roles import roles_required, user_has_role
from apps.accounts.scopes import business_lines_of, company_wide
from apps.common.csvcells import safe_dict, safe_row
from apps.ledger.services.periods import parse_month

MONEY_ROLES = ("finance", "admin")
LEDGER_ROLES = ("finance", "admin", "engineer")
# The reports (trial balance, matrix, journal, usage, budget vs actual, FOCUS) filter to the
# user's cost centres (`lines_of`); the rest of the ledger API is company-wide.
SeesMoney = company_wide(roles_required(*MONEY_ROLES))
SeesLedger = company_wide(roles_required(*LEDGER_ROLES))
IsAdmin = company_wide(roles_required("admin"))
SeesMoneyOfLines = roles_required(*MONEY_ROLES)
SeesLedgerOfLines = roles_required(*LEDGER_ROLES)


def field_error(name: str) -> Callable[[str], exceptions.ValidationError]:
    """Bad input as the API answers it: a 400 naming the field."""
    return lambda message: exceptions.ValidationError({name: [message]})


def lines_of(request: Request) -> list[str] | None:
    """The cost centres (business lines) a report shows the user; None: all."""
    return business_lines_of(request.user)


def scope_note(lines: list[str] | None) -> dict[str, Any]:
    """What a scoped report says about itself."""
    if lines is None:
        return {}
    return {"cost_centres": lines, "note": "only the lines of these cost centres (your scope)"}


def rows_of(output: type[serializers.Serializer], name: str, **extra: serializers.Field) -> Any:
    """The OpenAPI description of a table answer: `{"rows": [output, ...]}`, plus `extra` fields."""
    return inline_serializer(name, {"rows": output(many=True), **extra})


def sees_money(request: Request) -> bool:
    return user_has_role(request.user, *MONEY_ROLES)


def month_param(request: Request, name: str = "period", default: date | None = None) -> date:
    raw = request.query_params.get(name)
    if not raw:
        if default is not None:
            return default
        raise exceptions.ValidationError({name: ["required, YYYY-MM"]})
    return parse_month(raw, error=field_error(name))


class MoneyAware(serializers.Serializer):
    """An output serializer whose `money_fields` are left out unless context["money"] is true."""

    money_fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.context.get("money", True):
            for name in self.money_fields:
                self.fields.pop(name, None)


def money(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=30, decimal_places=2, coerce_to_string=True, **kwargs)


class CSVRenderer(BaseRenderer):
    """Renders `rows` (a list of flat dicts, or the response's "rows") as CSV with a byte-order
    mark; nested values are JSON. `?format=csv` on any ledger table selects it."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        rows: Iterable[dict[str, Any]] = data.get("rows", [data]) if isinstance(data, dict) else data or []
        rows = list(rows)
        columns = list(rows[0]) if rows else _columns((renderer_context or {}).get("view"))
        buffer = io.StringIO()
        # Column names can come from the data (dim keys): the header goes through the same guard.
        csv.writer(buffer, lineterminator="\n").writerow(safe_row(columns))
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
        writer.writerows(safe_dict({k: _cell(v) for k, v in row.items()}) for row in rows)
        # The byte-order mark: Excel on Chinese Windows reads the file as UTF-8 only with it.
        return ("\ufeff" + (buffer.getvalue() or "\n")).encode()


def _columns(view: Any) -> list[str]:
    """An empty table's header: its view's output fields, when it names them."""
    output = getattr(view, "Output", None)
    return list(output().fields) if output is not None else []


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, Decimal):
        return format(value, "f")
    return "" if value is None else value


def as_download(response: Response, request: Request, name: str) -> Response:
    if getattr(request, "accepted_renderer", None) is not None and request.accepted_renderer.format == "csv":
        response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response
