"""Tables as downloads: CSV with a byte-order mark (so Excel on Chinese Windows reads UTF-8) and
XLSX workbooks (one sheet per table, number formats by column kind, a frozen header, the
period and currency in the sheet), cells through the formula guard, headers as the page
shows them."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.http import HttpResponse, HttpResponseBadRequest
from django.utils.translation import gettext as _
from openpyxl import Workbook
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from apps.common.buckets import accounting_zone
from apps.common.csvcells import safe_cell, safe_row
from apps.common.tables import Column, Table

BOM = "\ufeff"
CSV_TYPE = "text/csv; charset=utf-8"
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
FORMATS = ("csv", "xlsx")
NUMBER_FORMATS = {
    "money": "#,##0.00",
    "pct": "0.0%",
    "int": "#,##0",
    "date": "yyyy-mm-dd",
    "datetime": "yyyy-mm-dd hh:mm",
}
# Rows 1 and 2: the title line and the header; data from row 3, the header frozen above it.
TITLE_ROW, HEADER_ROW = 1, 2
SHEET_NAME_BAD = re.compile(r"[\[\]:*?/\\]")
HEADER_FILL = PatternFill("solid", fgColor="DDE3EA")


class FormatError(ValueError):
    """A download format other than csv or xlsx."""


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime) and value.tzinfo:
        return value.astimezone(accounting_zone()).isoformat()  # the offset says the zone
    return value


def rows_csv(header: Iterable[Any], rows: Iterable[Iterable[Any]]) -> bytes:
    """UTF-8 CSV starting with the byte-order mark, every cell through the formula guard: the one
    CSV writer of the pages (tables, the audit)."""
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(safe_row(header))
    writer.writerows(safe_row(_csv_value(v) for v in cells) for cells in rows)
    return buffer.getvalue().encode("utf-8")


def table_csv(table: Table) -> bytes:
    """The table as UTF-8 CSV starting with the byte-order mark."""
    return rows_csv((c.label for c in table.columns), table.cells())


# --- XLSX ---------------------------------------------------------------------------------------


def sheet_name(title: str, taken: set[str]) -> str:
    """A valid sheet name from `title`: no []:*?/\\, at most 31 characters, unique in the book
    (Excel compares names case-insensitively)."""
    base = SHEET_NAME_BAD.sub(" ", title).strip().strip("'") or "Sheet"
    name, n = base[:31], 1
    while name.lower() in taken:
        n += 1
        suffix = f" ({n})"
        name = base[: 31 - len(suffix)] + suffix
    taken.add(name.lower())
    return name


def header_label(column: Column, currency: str) -> str:
    """A money column's header names its currency when the table has one."""
    return f"{column.label} ({currency})" if column.kind == "money" and currency else column.label


def title_line(table: Table) -> str:
    parts = [table.title]
    if table.period:
        parts.append(_("Period: %(period)s") % {"period": table.period})
    if table.currency:
        parts.append(_("Currency: %(currency)s") % {"currency": table.currency})
    return " · ".join(parts)


def _xlsx_value(value: Any, kind: str) -> Any:
    """What a cell stores: numbers as numbers, datetimes naive in the accounting zone (Excel has
    no zones), text through the formula guard."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(accounting_zone()).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, date | bool | Decimal | int | float):
        return value
    if isinstance(value, str) and kind in ("money", "pct", "int"):
        try:
            return Decimal(value)
        except ArithmeticError:
            pass
    return safe_cell(str(value))


def _width(value: Any) -> int:
    text = value if isinstance(value, str) else f"{value:,.2f}" if isinstance(value, Decimal | float) else str(value)
    # A CJK character takes two columns.
    return sum(2 if ord(ch) > 0x2E80 else 1 for ch in text)


def sheet_write(sheet: Worksheet, table: Table) -> None:
    """Title line, header (bold, frozen), rows with number formats by column kind, widths."""
    sheet.cell(TITLE_ROW, 1, safe_cell(title_line(table))).font = Font(bold=True, size=12)
    widths = []
    for i, column in enumerate(table.columns, start=1):
        cell = sheet.cell(HEADER_ROW, i, safe_cell(header_label(column, table.currency)))
        cell.font, cell.fill = Font(bold=True), HEADER_FILL
        cell.alignment = Alignment(wrap_text=True, vertical="top")
        cell.data_type = "s"
        widths.append(_width(cell.value))
    for r, cells in enumerate(table.cells(), start=HEADER_ROW + 1):
        for i, (column, raw) in enumerate(zip(table.columns, cells, strict=True), start=1):
            value = _xlsx_value(raw, column.kind)
            cell = sheet.cell(r, i, value)
            if isinstance(value, str):
                cell.data_type = "s"  # never a formula, whatever the text starts with
            elif column.kind in NUMBER_FORMATS:
                cell.number_format = NUMBER_FORMATS[column.kind]
            if value is not None:
                widths[i - 1] = max(widths[i - 1], _width(value))
    for i, width in enumerate(widths, start=1):
        sheet.column_dimensions[get_column_letter(i)].width = min(max(width + 2, 10), 60)
    sheet.freeze_panes = sheet.cell(HEADER_ROW + 1, 1)


def workbook_xlsx(tables: list[Table]) -> bytes:
    """One sheet per table, in order, named after its title."""
    book = Workbook()
    taken: set[str] = set()
    first = book.active
    assert first is not None
    book.remove(first)
    for table in tables:
        sheet_write(book.create_sheet(sheet_name(table.title, taken)), table)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def xlsx_response(tables: list[Table], *, filename: str) -> HttpResponse:
    """A workbook download; `filename` without its extension."""
    response = HttpResponse(workbook_xlsx(tables), content_type=XLSX_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{filename}.xlsx"'
    return response


def table_response(table: Table, *, fmt: str, filename: str) -> HttpResponse:
    """A download of `table` as `fmt` ("csv" or "xlsx"); `filename` without its extension.
    Raises FormatError for another format (the view answers it with a 400 or 404)."""
    if fmt == "xlsx":
        return xlsx_response([table], filename=filename)
    if fmt != "csv":
        raise FormatError(_("No download format %(fmt)s: choose csv or xlsx.") % {"fmt": repr(fmt)})
    response = HttpResponse(table_csv(table), content_type=CSV_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    return response


def table_download(table: Table, *, fmt: str, filename: str) -> HttpResponse:
    """`table_response` for a view: another format than csv or xlsx is a 400 that says which."""
    try:
        return table_response(table, fmt=fmt, filename=filename)
    except FormatError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
