"""A table as pages and spreadsheets share it: typed columns over rows of raw values. The page
formats a value by its column's kind (money with thousands separators and the currency,
percentages as percentages); the spreadsheet writers (XLSX with number formats, CSV with a
byte-order mark) write the raw value under the same translated header."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

Kind = Literal["text", "money", "pct", "int", "date", "datetime"]


@dataclass(frozen=True)
class Column:
    key: str  # the row's key
    label: str  # the translated header
    kind: Kind = "text"
    # A variance column (actual - budget): the nature of what the budget limits ("expense":
    # under is favourable), so the page colours each value by its side and says which side.
    nature: str = ""


@dataclass
class Table:
    name: str  # the download key (?download=<name>)
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    figure: str = ""  # plotly div and script, HTML
    currency: str = ""  # the currency of its money columns
    period: str = ""  # what the figures cover, e.g. "2026-11"
    links: dict[tuple[int, str], str] = field(default_factory=dict)  # (row index, column key) -> URL

    def cells(self) -> list[list[Any]]:
        return [[row.get(c.key) for c in self.columns] for row in self.rows]


def month_table(name: str, title: str, columns: list[Column], *, month: date, currency: str) -> Table:
    """A month's table in one currency, its rows still to add: `title` (translated) names the
    month and the currency with %(month)s and %(currency)s."""
    period = f"{month:%Y-%m}"
    return Table(name, title % {"month": period, "currency": currency}, columns, [], currency=currency, period=period)
