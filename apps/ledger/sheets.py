"""Tables as downloads: CSV with a byte-order mark (so Excel on Chinese Windows reads UTF-8),
cells through the formula guard, headers as the page shows them."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

from django.http import HttpResponse

from apps.common.tables import Table
from costplatform.csvcells import safe_row

BOM = "\ufeff"


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


def table_csv(table: Table) -> bytes:
    """The table as UTF-8 CSV starting with the byte-order mark."""
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(safe_row(c.label for c in table.columns))
    writer.writerows(safe_row(_csv_value(v) for v in cells) for cells in table.cells())
    return buffer.getvalue().encode("utf-8")


def table_response(table: Table, *, fmt: str, filename: str) -> HttpResponse:
    """A download of `table` as `fmt` ("csv"); `filename` without its extension."""
    if fmt != "csv":
        raise ValueError(f"no download format {fmt!r}")
    response = HttpResponse(table_csv(table), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    return response
