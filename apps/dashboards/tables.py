"""The dashboards' tables as people work with them: sorted by any column (?sort=<key>, or
?sort=-<key> for descending, kept in every link of the page), downloaded as CSV or XLSX
(?download=<table>&format=csv|xlsx: the rows shown, in the order shown, with the filters in the
file name), and a cost column per currency with its total wherever the reader sees money,
ordered costliest first unless they choose another column."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from apps.common.sheets import table_download
from apps.common.tables import Column, Table
from apps.dashboards.filters import Filters

SORT = "sort"
# Parameters a sort, search or download link leaves out of the link it builds: the cursor of
# the requests list (a new order starts at its first page) and the download itself.
NOT_CARRIED = ("after", "download", "format")
FILE_NAME_BAD = re.compile(r"[^A-Za-z0-9._=-]+")


@dataclass(frozen=True)
class Sort:
    key: str
    desc: bool
    # The query parameter that holds it: `sort` for a page's main table, `sort-<table>` for
    # each other table of the page, so that sorting one leaves the others as they were.
    name: str = SORT

    @property
    def param(self) -> str:
        return ("-" if self.desc else "") + self.key


def sort_param(table: str = "") -> str:
    """The query parameter of a table's sort: `sort` (the page's main table) or `sort-<table>`."""
    return f"{SORT}-{table}" if table else SORT


def sort_of(request: HttpRequest, keys: Iterable[str], default: Sort, *, table: str = "") -> Sort:
    """The sort the query asks for, when it names a column of the table; `default` otherwise."""
    name = sort_param(table)
    raw = request.GET.get(name, "")
    key = raw.removeprefix("-")
    return Sort(key, raw.startswith("-"), name) if key in set(keys) else replace(default, name=name)


def sorted_rows(rows: Sequence[Any], sort: Sort, value: Callable[[Any, str], Any]) -> list[Any]:
    """`rows` by `value(row, sort.key)`, empty values last whichever the direction."""
    present = [r for r in rows if value(r, sort.key) is not None]
    missing = [r for r in rows if value(r, sort.key) is None]
    return sorted(present, key=lambda r: _comparable(value(r, sort.key)), reverse=sort.desc) + missing


def sorted_as_asked(
    request: HttpRequest, rows: Sequence[dict[str, Any]], keys: Iterable[str], default: Sort, *, table: str = ""
) -> tuple[list[Any], Sort]:
    """The table's rows (dicts by column key) in the order the query asks for (sort_of), and that sort."""
    sort = sort_of(request, keys, default, table=table)
    return sorted_rows(rows, sort, lambda row, key: row.get(key)), sort


def _comparable(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def currencies_of(costs: Iterable[dict[str, Decimal]]) -> list[str]:
    return sorted({currency for cost in costs for currency in cost})


def cost_key(currency: str) -> str:
    return f"cost_{currency}"


def cost_columns(currencies: Sequence[str]) -> list[Column]:
    """One money column a currency, its header naming it (amounts in two currencies never add)."""
    return [Column(cost_key(c), _("Cost (%(currency)s)") % {"currency": c}, "money") for c in currencies]


def money_first(currencies: Sequence[str], otherwise: Sort) -> Sort:
    """The default order where money is shown: the costliest first (in the first currency)."""
    return Sort(cost_key(currencies[0]), True) if currencies else otherwise


def file_name(page: str, table: str, flt: Filters | None, **extra: str) -> str:
    """`page-table_filter=value_...`: the filters in the file name, only what a file name may hold."""
    params = {**(flt.params() if flt is not None else {}), **{k: v for k, v in extra.items() if v}}
    parts = [f"{page}-{table}", *(f"{name.removeprefix('dims.')}={value}" for name, value in params.items())]
    return FILE_NAME_BAD.sub("-", "_".join(parts))[:180]


def download(request: HttpRequest, table: Table, name: str) -> HttpResponse | None:
    """The download of `table` when the query asks for it (?download=<table.name>), else None."""
    if request.GET.get("download") != table.name:
        return None
    return table_download(table, fmt=request.GET.get("format", "csv"), filename=name)


def query_with(request: HttpRequest, **changes: str) -> str:
    """`?...` of the request's query without NOT_CARRIED, with `changes` set ("" removes one)."""
    query = request.GET.copy()
    for name in NOT_CARRIED:
        query.pop(name, None)
    for name, value in changes.items():
        query.pop(name, None)
        if value:
            query[name] = value
    return "?" + query.urlencode()


def cost_totals(rows: Iterable[dict[str, Any]], currencies: Sequence[str]) -> list[tuple[str, str, Decimal]]:
    """(currency, its column's key, the rows' total) of each currency shown."""
    rows = list(rows)
    return [(c, cost_key(c), sum((r.get(cost_key(c)) or Decimal(0) for r in rows), Decimal(0))) for c in currencies]
