"""The finance pages (finance and admin): the dashboard, the journal lines behind any of its
numbers, and plotly.js served from the installed plotly package (no CDN). A user scoped to
some business lines sees their cost centres only, everywhere."""

from __future__ import annotations

import gzip
from datetime import date
from decimal import Decimal
from functools import cache
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET

from apps.accounts.roles import user_has_role
from apps.accounts.scopes import business_lines_of
from apps.common.buckets import month_of
from apps.common.replica import replica_view
from apps.common.sheets import table_download
from apps.common.tables import Table
from apps.finance.journal import JOURNAL_PAGE, journal_table
from apps.finance.month import Dashboard, dashboard_build
from apps.ledger import conf, figures
from apps.ledger.idle.allocation import policy_in_force
from apps.ledger.models import Period
from apps.ledger.selectors import LineFilter
from apps.ledger.services.accrual import month_window
from apps.ledger.services.periods import parse_month


def _month(request: HttpRequest) -> date:
    raw = request.GET.get("month")
    if not raw:
        return month_of(timezone.now())
    return parse_month(raw, error=Http404)


def _finance_only(request: HttpRequest) -> None:
    if not user_has_role(request.user, "finance", "admin"):
        raise PermissionDenied("the finance pages are for the finance and admin roles")


def _download(request: HttpRequest, table: Table | None, name: str, filename: str) -> HttpResponse:
    if table is None:
        raise Http404(f"no table {name!r}")
    return table_download(table, fmt=request.GET.get("format", "csv"), filename=filename)


@replica_view
@require_GET
@login_required
def finance_dashboard(request: HttpRequest) -> HttpResponse:
    """The month's books of the user's cost centres; `?download=<table>` gives any table as a
    spreadsheet (`&format=csv`, the default)."""
    _finance_only(request)
    board = dashboard_build(
        month=_month(request), currency=request.GET.get("currency"), business_lines=business_lines_of(request.user)
    )
    name = request.GET.get("download")
    if name:
        return _download(request, board.table(name), name, f"finance-{name}-{board.month:%Y-%m}")
    closed = Period.objects.filter(month=board.month, status=Period.Status.CLOSED).exists()
    context = {"board": board, "month": f"{board.month:%Y-%m}", "closed": closed, **_headline(board)}
    context |= {"idle_policy": policy_in_force(board.month), "idle_cost_centre": conf.get("LEDGER_IDLE_COST_CENTRE")}
    return render(request, "finance/finance.html", context)


def _headline(board: Dashboard) -> dict[str, Any]:
    """The month's spend and tokens as every page defines them (apps/ledger/figures.py), and what
    the journal holds for the period as posted when that differs (priced rows not booked yet,
    adjusting entries between months)."""
    window = month_window(board.month)
    spent = figures.spend(start=window.start, end=window.end, lines=board.scoped)
    count = figures.tokens(start=window.start, end=window.end, lines=board.scoped)
    spend_table = board.table("spend")
    posted = spend_table.rows[-1]["total"] if spend_table is not None and spend_table.rows else Decimal(0)
    shown = spent.currency == board.currency
    return {
        "spent": spent if shown else None,
        "tokens_processed": count,
        "posted": posted if shown and posted != spent.total else None,
    }


def _line_filter(request: HttpRequest) -> LineFilter:
    day = request.GET.get("day") or ""
    parsed = parse_date(day) if day else None
    if day and parsed is None:
        raise Http404("day is a date, YYYY-MM-DD")
    return LineFilter(
        month=_month(request),
        account=request.GET.get("account") or None,
        cost_centre=request.GET.get("cost_centre") or None,
        day=parsed,
        model=request.GET.get("model") or None,
        kind=request.GET.get("kind") or None,
        entry=_entry(request.GET.get("entry") or ""),
    )


def _entry(value: str) -> int | None:
    if value and not value.isdigit():
        raise Http404("entry is a journal entry's number")
    return int(value) if value else None


@replica_view
@require_GET
@login_required
def finance_journal(request: HttpRequest) -> HttpResponse:
    """The journal lines behind a finance number (month, account, cost centre, day, model), each
    leading to the usage it was booked from."""
    _finance_only(request)
    flt = _line_filter(request)
    offset = request.GET.get("offset", "0")
    if not offset.isdigit():
        raise Http404("offset is a non-negative integer")
    found = journal_table(
        flt=flt,
        business_lines=business_lines_of(request.user),
        expense_only=request.GET.get("side") == "expense",
        currency=request.GET.get("currency") or None,
        offset=int(offset),
    )
    if request.GET.get("download"):
        return _download(request, found.table, "journal", f"journal-{flt.month:%Y-%m}")
    query = request.GET.copy()
    query.pop("offset", None)
    context: dict[str, Any] = {
        "found": found,
        "flt": flt,
        "month": f"{flt.month:%Y-%m}",
        "query": query.urlencode(),
        "next_offset": int(offset) + JOURNAL_PAGE if found.more else None,
        "scoped": business_lines_of(request.user),
    }
    return render(request, "finance/journal.html", context)


@cache
def _plotly_js() -> bytes:
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs()).encode()


@cache
def _plotly_js_gzipped() -> bytes:
    # 4.8 MB as it is, 1.5 MB gzipped: compressed once per process, then sent as it is.
    return gzip.compress(_plotly_js(), compresslevel=9, mtime=0)


@require_GET
def plotly_js(request: HttpRequest) -> HttpResponse:
    """plotly.js from the installed plotly package, gzipped for a browser that takes it (every
    browser does); the figures' pages wait for it before they draw."""
    gzipped = "gzip" in request.headers.get("Accept-Encoding", "")
    body = _plotly_js_gzipped() if gzipped else _plotly_js()
    response = HttpResponse(body, content_type="application/javascript; charset=utf-8")
    if gzipped:
        response["Content-Encoding"] = "gzip"
    response["Content-Length"] = str(len(body))
    response["Vary"] = "Accept-Encoding"
    response["Cache-Control"] = "public, max-age=86400"
    return response


urlpatterns = [
    path("finance/", finance_dashboard, name="finance"),
    path("finance/journal/", finance_journal, name="finance-journal"),
    path("finance/plotly.min.js", plotly_js, name="plotly-js"),
]
