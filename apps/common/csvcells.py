"""CSV cells that a spreadsheet shows as text and never runs (CSV or formula injection).

Excel, LibreOffice and Google Sheets evaluate a cell that starts with `=`, `+`, `-` or `@` as
a formula, and a leading tab or carriage return is dropped before they look: a business line or
model named `=HYPERLINK("http://evil", "click")` would become a live link in finance's
workbook. The OWASP rule: such a text cell gets a leading single quote, which the spreadsheet
shows as text. A plain number is left as it is, so a negative amount still sums. Every export
(the FOCUS file, the ledger tables, the finance dashboard, the audit) writes its rows through
`safe_row` or `safe_dict`.

Uploads go the other way: `csv_text` reads a CSV file as finance saves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A number as the exports write one: optional sign, digits, optional fraction and exponent.
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """`value`, with a leading `'` when it is text a spreadsheet would run as a formula."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS) or _NUMBER.fullmatch(value):
        return value
    return "'" + value


def safe_row(values: Iterable[Any]) -> list[Any]:
    return [safe_cell(v) for v in values]


def safe_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: safe_cell(v) for k, v in row.items()}


# What a spreadsheet saves a CSV as: UTF-8 (Excel adds a byte-order mark) or, on Chinese
# Windows, the ANSI code page GBK, of which GB18030 is the superset.
CSV_ENCODINGS = ("utf-8-sig", "gb18030")


def csv_text(content: bytes) -> str | None:
    """An uploaded CSV file as text, in the first of CSV_ENCODINGS that reads it; None when none does."""
    for encoding in CSV_ENCODINGS:
        try:
            return content.decode(encoding)
        except UnicodeDecodeError:
            continue
    return None
