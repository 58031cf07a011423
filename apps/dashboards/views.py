"""The engineering pages: the overview (health metrics against their thresholds, spend,
tokens by class over time) and the waste drill-down, class -> reason -> model -> business
line / feature / step -> requests -> one record. Every role reads them; money only for
finance, admin or a user granted it; a scoped user sees only its business lines."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from apps.accounts.roles import reader_required, user_has_role
from apps.accounts.scopes import business_lines_of, line_visible, sees_money
from apps.audits.selectors import READERS as AUDIT_READERS
from apps.audits.selectors import findings_on_scope
from apps.classification.engine import CLASSES
from apps.classification.reasons import explained
from apps.common.buckets import day_of
from apps.common.labels import label
from apps.common.replica import replica_view
from apps.common.tables import Column, Table
from apps.dashboards import selectors
from apps.dashboards.figures import class_series_figure, sparkline_figure
from apps.dashboards.filters import BREAKDOWN, PRESETS, RANGES, Filters, filters_from, groups
from apps.dashboards.health import metric_states, thresholds_shown
from apps.dashboards.saved_views import saved_views_context
from apps.dashboards.tables import (
    Sort,
    cost_columns,
    cost_key,
    cost_totals,
    currencies_of,
    download,
    file_name,
    money_first,
    query_with,
    sorted_as_asked,
)
from apps.ingest.contract import STATUSES
from apps.ingest.models import TOKEN_FIELDS, Record
from apps.ingest.selectors import InvalidCursor, RecordFilter, dim_values, records_list
from apps.ingest.services import FINISH_CODES
from apps.ledger import figures as ledger_figures

PAGE_SIZE = 50
# Reasons that a record's own fields decide; other reasons (duplicates, custom rules) list the
# requests of the model and dims, with a note.
REASON_RECORDS: dict[str, dict[str, int]] = {
    **{f"waste.{status}": {"status": STATUSES.index(status)} for status in STATUSES[1:]},
    "waste.truncated": {"status": 0, "finish_reason": FINISH_CODES["length"]},
}


# The overview's "top wasteful" tables: dims an engineer changes code for.
TOP_WASTE_DIMS = ("feature", "step")


def class_labels() -> dict[str, str]:
    return {"effective": _("effective"), "waste": _("waste"), "cache": _("cache"), "shadow": _("shadow")}


def _context(request: HttpRequest, flt: Filters, **extra: Any) -> dict[str, Any]:
    lines = business_lines_of(request.user)
    return {
        "flt": flt,
        "ranges": [(key, label) for key, (_width, label) in RANGES.items()],
        "presets": list(PRESETS.items()),
        "custom_dates": _custom_dates(flt),
        "dim_choices": _dim_choices(flt, lines),
        "scope": lines,
        "money": sees_money(request.user),
        "class_labels": class_labels(),
        **saved_views_context(request),
        **extra,
    }


def _custom_dates(flt: Filters) -> tuple[str, str]:
    """The from/to dates (accounting days) the form shows: the window's, whatever chose it."""
    last = day_of(flt.end - timedelta(microseconds=1))
    return f"{day_of(flt.start):%Y-%m-%d}", f"{last:%Y-%m-%d}"


def _dim_choices(flt: Filters, lines: list[str] | None) -> list[dict[str, Any]]:
    """Each rollup dim with the values the reader may pick (those of their lines), the chosen one
    kept even if no dim set holds it; values None: too many to list, typed instead."""
    from django.conf import settings

    known = dim_values(names=list(settings.ROLLUP_DIMS), lines=lines)
    choices = []
    for name, values in known.items():
        chosen = flt.dims.get(name, "")
        if values is not None and chosen and chosen not in values:
            values = sorted([*values, chosen])
        choices.append({"name": name, "values": values, "chosen": chosen})
    return choices


@replica_view
@reader_required
def overview(request: HttpRequest) -> HttpResponse:
    flt = filters_from(request)
    flt = Filters(flt.start, flt.end, flt.range, flt.dims, model=flt.model)  # the overview shows every class
    lines, money = business_lines_of(request.user), sees_money(request.user)
    summed = selectors.overview(flt=flt, lines=lines, money=money)
    found = summed.health
    waste = reverse("dashboards:waste")
    classes = _classes_table(request, flt, found.by_class, summed.class_spend if money else None)
    if isinstance(classes, HttpResponse):
        return classes
    lines_table = _slices_table(
        request,
        flt,
        [
            {"slice": s, "label": s.value or _("(none)"), "href": waste + flt.query(dims={"business_line": s.value})}
            | {"linked": bool(s.value)}
            for s in summed.lines
        ],
        first=Column("label", _("Business line"), "text"),
        extra=[],
        name="lines",
        part="business-lines",
        page="overview",
        title=_("Business lines"),
    )
    if isinstance(lines_table, HttpResponse):
        return lines_table
    top_waste = _top_waste(request, flt, lines)
    for table in top_waste:
        answered = download(request, table["table"], file_name("overview", table["table"].name, flt))
        if answered is not None:
            return answered
    context = _context(
        request,
        flt,
        **lines_table,
        metrics=[
            {**state, "href": waste + flt.query(token_class=state["drill"])}
            for state in metric_states(found, thresholds_shown(dims=flt.dims, lines=lines))
        ],
        total=found.total,
        cache_writes=found.prompt_cache_write,
        cache_writes_href=waste + flt.query(token_class="effective"),
        records_yet=found.total > 0 or selectors.records_exist(lines=lines),
        **classes,
        spend=sorted(summed.spend.items()) if money else [],
        spent=_spend(flt, lines) if money else None,
        figure=class_series_figure(summed.series, class_labels(), granularity=flt.granularity),
        top_waste=top_waste,
        audit_flags=_audit_flags(request, flt, lines),
    )
    return render(request, "dashboards/overview.html", context)


@reader_required
def figures_page(request: HttpRequest) -> HttpResponse:
    """What each headline figure means (the names the pages' data-figure attributes carry)."""
    return render(request, "dashboards/figures.html")


def _spend(flt: Filters, lines: list[str] | None) -> ledger_figures.Spend | None:
    """The window's spend as the books define it (apps/ledger/figures.py), for the reader's lines and
    the chosen line and model; None when a dim the books do not keep is chosen (a feature, a step):
    the page then shows what those tokens cost, without idle capacity, which no feature uses."""
    dims = dict(flt.dims)
    line = dims.pop("business_line", None)
    if dims:
        return None
    scope = lines
    if line is not None:
        scope = [line] if lines is None or line in lines else []
    return ledger_figures.spend(start=flt.start, end=flt.end, lines=scope, model=flt.model or None)


def _audit_flags(request: HttpRequest, flt: Filters, lines: list[str] | None) -> dict[str, Any] | None:
    """The audit's findings on the scope shown (apps/audits/selectors.py), each linked to its row
    of the report for those who read the audit."""
    flagged = findings_on_scope(start=flt.start, end=flt.end, dims=flt.dims, model=flt.model, lines=lines)
    if flagged is None:
        return None
    month = f"{flagged.report.month:%Y-%m}"
    report = reverse("audit-report", args=[month]) if user_has_role(request.user, *AUDIT_READERS) else ""
    rows = [{"finding": f, "href": f"{report}#finding-{f.position}" if report else ""} for f in flagged.findings]
    currency = flagged.report.currency
    return {"month": month, "earlier": flagged.earlier, "report": report, "rows": rows, "currency": currency}


def _classes_table(
    request: HttpRequest, flt: Filters, by_class: dict[str, int], spend: dict[str, dict[str, Decimal]] | None
) -> dict[str, Any] | HttpResponse:
    """The tokens of each class in the window (each leading to its waste page) and, for a reader
    who sees money (`spend` given), their cost per currency with its total, sorted as asked
    (?sort-classes=; costliest first where money is shown), or the table's download."""
    waste = reverse("dashboards:waste")
    total = sum(by_class.values())
    currencies = currencies_of((spend or {}).values())
    rows = [
        {
            "name": c,
            "label": class_labels()[c],
            "tokens": by_class.get(c, 0),
            "share": _share(by_class.get(c, 0), total),
            "href": waste + flt.query(token_class=c),
        }
        | {cost_key(currency): (spend or {}).get(c, {}).get(currency) for currency in currencies}
        for c in CLASSES
    ]
    columns = [
        Column("label", _("Class"), "text"),
        Column("tokens", _("Tokens"), "int"),
        Column("share", _("Share of all tokens"), "pct"),
        *cost_columns(currencies),
    ]
    default = money_first(currencies, Sort("tokens", True))
    rows, sort = sorted_as_asked(request, rows, [c.key for c in columns], default, table="classes")
    table = Table("classes", _("Tokens by class"), columns, rows, period=_period(flt))
    found = download(request, table, file_name("overview", "classes", flt, sort=sort.param))
    if found is not None:
        return found
    return {"classes": rows, "classes_sort": sort, "classes_costs": cost_totals(rows, currencies)}


def _top_waste(request: HttpRequest, flt: Filters, lines: list[str] | None) -> list[dict[str, Any]]:
    """Per dim of TOP_WASTE_DIMS (those configured): its most wasteful values, every reason
    together, against the window before, each table sorted as asked (?sort-top-waste-<dim>=);
    each row leads to the waste of that value by reason."""
    from django.conf import settings

    waste = reverse("dashboards:waste")
    dims = [d for d in TOP_WASTE_DIMS if d in settings.ROLLUP_DIMS]
    money = sees_money(request.user)
    ranked = selectors.top_waste(flt=flt, lines=lines, dims=dims, money=money) if dims else {}
    tables = []
    for dim in dims:
        name = f"top-waste-{dim}"
        currencies = currencies_of(t.cost for t in ranked[dim])
        rows = [
            {
                "trend": trend,
                "label": trend.value or _("(none)"),
                "tokens": trend.tokens,
                "previous": trend.previous,
                "href": waste + flt.query(token_class="waste", dims={dim: trend.value}) if trend.value else "",
                "sparkline": sparkline_figure(trend.points, div_id=f"spark-{dim}-{i}"),
            }
            | {cost_key(c): trend.cost.get(c) for c in currencies}
            for i, trend in enumerate(ranked[dim])
        ]
        columns = [
            Column("label", label(dim), "text"),
            Column("tokens", _("Waste tokens"), "int"),
            Column("previous", _("Previous period"), "int"),
            *cost_columns(currencies),
        ]
        default = money_first(currencies, Sort("tokens", True))
        rows, sort = sorted_as_asked(request, rows, [c.key for c in columns], default, table=name)
        title = _("Top wasteful: %(what)s") % {"what": label(dim)}
        table = Table(name, title, columns, rows, period=_period(flt))
        tables.append(
            {
                "dim": dim,
                "label": label(dim),
                "rows": rows,
                "sort": sort,
                "currencies": cost_totals(rows, currencies),
                "all": waste + flt.query(group=dim),
                "table": table,
            }
        )
    return tables


def _level(flt: Filters) -> str:
    if flt.group:
        return "group"
    if not flt.token_class:
        return "class"
    if not flt.reason:
        return "reason"
    return "model" if not flt.model else "dims"


def _next_href(flt: Filters, level: str, value: str) -> str:
    """Where a number of the `level` table leads: one level deeper with `value` chosen."""
    waste, requests = reverse("dashboards:waste"), reverse("dashboards:requests")
    if level == "class":
        return waste + flt.query(token_class=value)
    if level == "reason":
        return waste + flt.query(reason=value)
    if level == "model":
        return waste + flt.query(model=value)
    position = BREAKDOWN.index(flt.by)
    if not value:
        return requests + flt.query()
    if position + 1 < len(BREAKDOWN):
        return waste + flt.query(dims={flt.by: value}, by=BREAKDOWN[position + 1])
    return requests + flt.query(dims={flt.by: value})


def _trail(flt: Filters) -> list[tuple[str, str]]:
    """The breadcrumb: each step back up the drill-down, with its link."""
    waste = reverse("dashboards:waste")
    top = Filters(flt.start, flt.end, flt.range, flt.dims)
    trail = [(_("All classes"), waste + top.query())]
    if flt.token_class:
        trail.append((class_labels()[flt.token_class], waste + top.query(token_class=flt.token_class)))
    if flt.reason:
        trail.append((flt.reason, waste + top.query(token_class=flt.token_class, reason=flt.reason)))
    if flt.model:
        trail.append((flt.model, waste + flt.query(by=BREAKDOWN[0])))
    return trail


def _group_href(flt: Filters, measured: str, value: str, *, page: str) -> str:
    """Where a value of the grouped table leads: the waste of the measured class narrowed to it
    (by reason), or its requests."""
    chosen = Filters(flt.start, flt.end, flt.range, flt.dims, measured, flt.reason, flt.model)
    if flt.group == "conversation":  # its requests in order, whichever link
        return reverse("dashboards:conversation") + chosen.query() + "&" + urlencode({"id": value})
    if flt.group == "model":
        query = chosen.query(model=value)
    elif flt.group == "reason":
        query = chosen.query(reason=value, token_class=value.split(".", 1)[0])
    else:
        query = chosen.query(dims={flt.group: value})
    return reverse(page) + query


def _grouped(request: HttpRequest, flt: Filters) -> HttpResponse:
    lines = business_lines_of(request.user)
    if flt.group == "conversation":
        found = selectors.by_conversation(flt=flt, lines=lines)
    else:
        found = selectors.grouped(flt=flt, lines=lines, group=flt.group, money=sees_money(request.user))
    rows = [
        {
            "slice": s,
            "label": s.value or _("(none)"),
            "of": found.totals.get(s.value, 0),
            "share": _share(s.tokens, found.totals.get(s.value, 0)),
            "href": _group_href(flt, found.measured, s.value, page="dashboards:waste") if s.value else "",
            "requests": _group_href(flt, found.measured, s.value, page="dashboards:requests") if s.value else "",
            "explained": explained(s.value) if flt.group == "reason" else None,
        }
        for s in found.slices
    ]
    first = Column("label", label(flt.group), "text")
    extra = [Column("share", _("Share of its tokens"), "pct"), Column("of", _("All its tokens"), "int")]
    shown = _slices_table(request, flt, rows, first=first, extra=extra, name="grouped", part=flt.group)
    if isinstance(shown, HttpResponse):
        return shown
    context = _context(
        request,
        flt,
        level="group",
        group=flt.group,
        measured=found.measured,
        **shown,
        records_yet=bool(rows) or selectors.records_exist(lines=lines),
        total=sum(s.tokens for s in found.slices),
        trail=_trail(flt),
        group_choices=_group_choices(flt),
        reason_shown=flt.reason,
        reason_explained=explained(flt.reason),
        conversations_from=(
            max(flt.start, flt.end - selectors.CONVERSATION_WINDOW) if flt.group == "conversation" else None
        ),
        audit_flags=_audit_flags(request, flt, lines),
    )
    return render(request, "dashboards/waste_grouped.html", context)


def _share(tokens: int, of: int) -> Decimal | None:
    return Decimal(tokens) / Decimal(of) if of else None


def _first_title(level: str, group: str) -> str:
    """The first column's header of the breakdown at `level`."""
    titles = {"class": _("Class"), "reason": _("Reason"), "model": _("Model")}
    return titles.get(level) or label(group)


def _slices_table(
    request: HttpRequest,
    flt: Filters,
    rows: list[dict[str, Any]],
    *,
    first: Column,
    extra: list[Column],
    name: str,
    part: str,
    page: str = "waste",
    title: str = "",
) -> dict[str, Any] | HttpResponse:
    """A waste table of slices sorted as asked (costliest first where money is shown, else the
    most tokens), with a cost column and total per currency for those who see money; or its
    download when the query asks for it."""
    money = sees_money(request.user)
    currencies = currencies_of(r["slice"].cost for r in rows) if money else []
    for row in rows:
        row["tokens"] = row["slice"].tokens
        row.update({cost_key(c): row["slice"].cost.get(c) for c in currencies})
    columns = [first, Column("tokens", _("Tokens"), "int"), *extra, *cost_columns(currencies)]
    rows, sort = sorted_as_asked(request, rows, [c.key for c in columns], money_first(currencies, Sort("tokens", True)))
    costs = cost_totals(rows, currencies)
    table = Table(name, title or _("Waste drill-down"), columns, rows, period=_period(flt))
    found = download(request, table, file_name(page, part, flt, sort=sort.param))
    if found is not None:
        return found
    return {"rows": rows, "sort": sort, "currencies": costs, "table_name": name, "first_title": first.label}


def _period(flt: Filters) -> str:
    first, last = _custom_dates(flt)
    return first if first == last else f"{first} to {last}"


def _group_choices(flt: Filters) -> list[tuple[str, str, str]]:
    """(name, label, link) of each grouping across reasons, from wherever the page stands."""
    waste = reverse("dashboards:waste")
    return [(name, label(name), waste + flt.query(group=name)) for name in groups()]


@replica_view
@reader_required
def waste(request: HttpRequest) -> HttpResponse:
    flt = filters_from(request)
    if flt.group:
        return _grouped(request, flt)
    lines, money = business_lines_of(request.user), sees_money(request.user)
    level = _level(flt)
    group = flt.by if level == "dims" else level
    slices = selectors.breakdown(flt=flt, lines=lines, group=group, money=money)
    total = sum(s.tokens for s in slices)
    requests = reverse("dashboards:requests")
    rows = [
        {
            "slice": s,
            "label": class_labels().get(s.value, s.value) if level == "class" else (s.value or _("(none)")),
            "href": _next_href(flt, level, s.value),
            "requests": requests + flt.query(dims={flt.by: s.value}) if level == "dims" and s.value else "",
            "explained": explained(s.value) if level == "reason" else None,
            "share": _share(s.tokens, total),
        }
        for s in slices
    ]
    first = Column("label", _first_title(level, group), "text")
    shown = _slices_table(
        request, flt, rows, first=first, extra=[Column("share", _("Share"), "pct")], name="breakdown", part=group
    )
    if isinstance(shown, HttpResponse):
        return shown
    context = _context(
        request,
        flt,
        level=level,
        group=group,
        **shown,
        records_yet=bool(rows) or selectors.records_exist(lines=lines),
        total=total,
        trail=_trail(flt),
        tabs=[(name, label(name), flt.query(by=name)) for name in BREAKDOWN] if level == "dims" else [],
        requests_href=requests + flt.query(),
        group_choices=_group_choices(flt),
        reason_shown=flt.reason,
        reason_explained=explained(flt.reason),
        audit_flags=_audit_flags(request, flt, lines),
    )
    return render(request, "dashboards/waste.html", context)


DUPLICATE = "waste.duplicate"


@replica_view
@reader_required
def duplicates(request: HttpRequest) -> HttpResponse:
    """The actual duplicates in the window (of one prompt hash with ?hash=), each beside the
    earlier request it repeats."""
    flt = filters_from(request)
    return _duplicates(request, flt, prompt_hash=_hash_of(request))


def _hash_of(request: HttpRequest) -> bytes | None:
    text = request.GET.get("hash", "")
    if not text:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError as exc:
        raise Http404("hash is a prompt hash in hex") from exc


def _duplicates(request: HttpRequest, flt: Filters, *, prompt_hash: bytes | None) -> HttpResponse:
    found = selectors.duplicates(flt=flt, lines=business_lines_of(request.user), prompt_hash=prompt_hash)
    shown = _duplicates_table(request, flt, found, prompt_hash=prompt_hash)
    if isinstance(shown, HttpResponse):
        return shown
    context = _context(
        request,
        flt,
        **shown,
        prompt_hash=prompt_hash.hex() if prompt_hash is not None else "",
        limit=DUPLICATES_SHOWN,
        reason_shown=DUPLICATE,
        reason_explained=explained(DUPLICATE),
        trail=_trail(flt),
    )
    return render(request, "dashboards/duplicates.html", context)


DUPLICATES_SHOWN = 50


def _duplicates_table(
    request: HttpRequest, flt: Filters, found: list[selectors.Duplicate], *, prompt_hash: bytes | None
) -> dict[str, Any] | HttpResponse:
    """The duplicates shown (the newest 50) as a table sorted as asked, each with what it cost for
    those who see money (all of it waste), the costliest first."""
    costs = selectors.records_cost(records=[d.record for d in found]) if sees_money(request.user) else {}
    currencies = sorted({c.currency for c in costs.values() if c.currency})
    record_url = reverse("dashboards:record")
    rows = []
    for d in found:
        row = _record_row(d.record, costs.get(d.record.pk))
        row |= {"duplicate": d.record, "original": d.original, "original_id": d.original.record_id}
        row |= {"original_ts": d.original.ts, "gap": (d.record.ts - d.original.ts).total_seconds()}
        row |= {
            "href": record_url + _record_query(flt, d.record),
            "original_href": record_url + _record_query(flt, d.original),
        }
        rows.append(row)
    columns = [
        Column("record_id", _("Duplicate"), "text"),
        Column("ts", _("Time"), "datetime"),
        Column("model", _("Model"), "text"),
        Column("business_line", _("Business line"), "text"),
        Column("original_id", _("Repeats"), "text"),
        Column("original_ts", _("Its time"), "datetime"),
        Column("gap", _("Seconds later"), "int"),
        Column("prompt", _("Prompt"), "int"),
        Column("completion", _("Completion"), "int"),
        *cost_columns(currencies),
    ]
    rows, sort = sorted_as_asked(request, rows, [c.key for c in columns], money_first(currencies, Sort("ts", True)))
    table = Table("duplicates", _("Duplicate requests"), columns, rows, period=_period(flt))
    hashed = prompt_hash.hex()[:12] if prompt_hash is not None else ""
    found_download = download(request, table, file_name("waste", "duplicates", flt, hash=hashed, sort=sort.param))
    if found_download is not None:
        return found_download
    totals = cost_totals(rows, currencies)
    return {"rows": rows, "sort": sort, "currencies": totals, "table_name": table.name}


@replica_view
@reader_required
def requests_list(request: HttpRequest) -> HttpResponse:
    flt = filters_from(request)
    if flt.reason == DUPLICATE:  # decided across requests: list them with what they repeat
        return _duplicates(request, flt, prompt_hash=None)
    predicate = REASON_RECORDS.get(flt.reason, {})
    record_filter = RecordFilter(
        start=flt.start,
        end=flt.end,
        model=flt.model or None,
        dims=flt.dims or None,
        business_lines=business_lines_of(request.user),
        **predicate,
    )
    searched = request.GET.get("q", "").strip()
    if searched:  # a record, request or conversation id: its records, whatever the reason
        found, nxt = selectors.records_search(flt=flt, lines=record_filter.business_lines, text=searched), None
    else:
        try:
            found, nxt = records_list(flt=record_filter, limit=PAGE_SIZE, after=request.GET.get("after") or None)
        except InvalidCursor as exc:
            raise Http404(str(exc)) from exc
    shown = _records_table(request, flt, found, searched=searched)
    if isinstance(shown, HttpResponse):
        return shown
    after = query_with(request, after=nxt) if nxt else ""
    context = _context(
        request,
        flt,
        **shown,
        searched=searched,
        next_href=(reverse("dashboards:requests") + after) if nxt else "",
        by_reason=bool(predicate),
        reason_shown=flt.reason,
        reason_explained=explained(flt.reason),
        trail=_trail(flt),
        back=reverse("dashboards:waste") + flt.query(),
    )
    return render(request, "dashboards/requests.html", context)


def _records_table(
    request: HttpRequest, flt: Filters, found: list[Record], *, searched: str
) -> dict[str, Any] | HttpResponse:
    """The page of requests as a table: sorted as asked within the page (the cursor walks the
    window newest first, a page at a time, so no order reads more than the page: a record's cost is
    not kept but priced here, for the page's 50), its cost per currency for those who see money."""
    costs = selectors.records_cost(records=found) if sees_money(request.user) else {}
    currencies = sorted({c.currency for c in costs.values() if c.currency})
    record_url = reverse("dashboards:record")
    rows = [_record_row(r, costs.get(r.pk)) | {"record": r, "href": record_url + _record_query(flt, r)} for r in found]
    columns = [*_record_columns(), *cost_columns(currencies)]
    rows, sort = sorted_as_asked(request, rows, [c.key for c in columns], Sort("ts", True))
    table = Table("requests", _("Requests"), columns, rows, period=_period(flt))
    name = file_name("requests", "page", flt, q=searched, sort=sort.param, after=request.GET.get("after", "")[:12])
    found_download = download(request, table, name)
    if found_download is not None:
        return found_download
    totals = cost_totals(rows, currencies)
    return {"records": rows, "sort": sort, "currencies": totals, "table_name": table.name}


def _record_columns() -> list[Column]:
    return [
        Column("record_id", _("Record"), "text"),
        Column("ts", _("Time"), "datetime"),
        Column("model", _("Model"), "text"),
        *(Column(name, label(name), "text") for name in BREAKDOWN),
        Column("status", _("Status"), "text"),
        Column("finish", _("Finish"), "text"),
        Column("prompt", _("Prompt"), "int"),
        Column("prompt_cached", _("Cached"), "int"),
        Column("completion", _("Completion"), "int"),
        Column("e2e", _("End to end, ms"), "int"),
    ]


def _record_row(r: Record, cost: selectors.RecordCost | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "record_id": r.record_id,
        "ts": r.ts,
        "model": str(r.model),
        **{name: r.dims.dims.get(name, "") for name in BREAKDOWN},
        "status": r.get_status_display(),
        "finish": r.get_finish_reason_display() or "",  # type: ignore[attr-defined]
        "prompt": r.prompt,
        "prompt_cached": r.prompt_cached,
        "completion": r.completion,
        "e2e": r.e2e,
    }
    if cost is not None and cost.currency:
        row[cost_key(cost.currency)] = cost.amount
    return row


def _record_query(flt: Filters, record: Record) -> str:
    named = {"ts": record.ts.isoformat(), "source": record.source_id, "key": record.record_key}
    return flt.query() + "&" + urlencode(named)


@replica_view
@reader_required
def record_page(request: HttpRequest) -> HttpResponse:
    flt = filters_from(request)
    ts: datetime | None = parse_datetime(request.GET.get("ts", ""))
    source, key = request.GET.get("source", ""), request.GET.get("key", "")
    if ts is None or not source.isdigit() or not key.lstrip("-").isdigit():
        raise Http404("a record is named by ts, source and key")
    record = (
        Record.objects.select_related("model", "dims", "source")
        .filter(ts=ts, source_id=int(source), record_key=int(key))
        .first()
    )
    if record is None or not line_visible(request.user, record.dims.business_line):
        raise Http404("no such record")
    components = _components(request, record, money=sees_money(request.user))
    if isinstance(components, HttpResponse):
        return components
    context = _context(
        request,
        flt,
        record=record,
        tokens=[(label(name), getattr(record, name)) for name in TOKEN_FIELDS],
        timing=[(label(name), getattr(record, name)) for name in ("queued", "ttft", "prefill", "decode", "e2e")],
        prompt_hash=bytes(record.prompt_hash).hex() if record.prompt_hash is not None else "",
        original=_linked(flt, selectors.original_of(record=record)),
        same_prompt=_same_prompt_href(flt, record),
        components=components,
        sort=components["sort"],
        retries=[_linked(flt, r) for r in selectors.retry_chain(record=record, lines=business_lines_of(request.user))],
        conversation=_conversation_href(record),
        trail=_trail(flt),
        back=reverse("dashboards:requests") + flt.query(),
    )
    return render(request, "dashboards/record.html", context)


def _components(request: HttpRequest, record: Record, *, money: bool) -> dict[str, Any] | HttpResponse:
    """Where the record's tokens went, component by component (in the record's order unless a
    column is chosen), with each one's cost for those who see money; or the table's download."""
    found = selectors.record_components(record=record)
    currency = found.currency if money else ""
    rows = [
        {
            "n": i,
            "component": c,
            "name": label(c.name),
            "tokens": c.tokens,
            "reason": c.reason,
            "explained": explained(c.reason),
            "cost": c.cost if money else None,
        }
        for i, c in enumerate(found.rows)
        if c.tokens
    ]
    columns = [
        Column("name", _("Component"), "text"),
        Column("tokens", _("Tokens"), "int"),
        Column("reason", _("Class.reason"), "text"),
        *([Column("cost", _("Cost (%(currency)s)") % {"currency": currency}, "money")] if currency else []),
    ]
    rows, sort = sorted_as_asked(request, rows, ["n", *(c.key for c in columns)], Sort("n", False))
    table = Table("components", _("Where its tokens went"), columns, rows)
    found_download = download(request, table, file_name("record", record.record_id, None, sort=sort.param))
    if found_download is not None:
        return found_download
    shown = {"ruleset": found.ruleset, "rows": rows, "currency": currency, "sort": sort, "table_name": table.name}
    if not money:
        return shown
    # A pool's record: the pool, its hour's rate (None: the hour is not priced yet) and the total.
    return shown | {"pool": found.pool, "pool_rate": found.pool_rate, "cost": found.cost}


def _conversation_href(record: Record) -> str:
    conversation_id = record.dims.dims.get(selectors.CONVERSATION_DIM)
    if not conversation_id:
        return ""
    around = Filters(record.ts - selectors.AROUND, record.ts + selectors.AROUND, "", {})
    return reverse("dashboards:conversation") + around.query() + "&" + urlencode({"id": conversation_id})


@replica_view
@reader_required
def conversation(request: HttpRequest) -> HttpResponse:
    """One conversation's requests in order, oldest first: where an agent's loops show."""
    flt = filters_from(request)
    conversation_id = request.GET.get("id", "")
    if not conversation_id:
        raise Http404("a conversation is named by ?id=")
    found = selectors.conversation(flt=flt, lines=business_lines_of(request.user), conversation_id=conversation_id)
    shown = _conversation_table(request, flt, found, conversation_id)
    if isinstance(shown, HttpResponse):
        return shown
    context = _context(request, flt, conversation_id=conversation_id, **shown, trail=_trail(flt))
    return render(request, "dashboards/conversation.html", context)


def _conversation_table(
    request: HttpRequest, flt: Filters, found: list[Record], conversation_id: str
) -> dict[str, Any] | HttpResponse:
    """The conversation's requests numbered in the order sent, each marked where it repeats a
    prompt sent before, with its cost for those who see money; sorted as asked (the order sent
    unless another column is chosen), or the table's download."""
    hashes = [bytes(r.prompt_hash).hex() if r.prompt_hash is not None else "" for r in found]
    costs = selectors.records_cost(records=found) if sees_money(request.user) else {}
    currencies = sorted({c.currency for c in costs.values() if c.currency})
    record_url = reverse("dashboards:record")
    rows = [
        _record_row(r, costs.get(r.pk))
        | {
            "n": i + 1,
            "record": r,
            "href": record_url + _record_query(flt, r),
            "hash": h[:12],
            "repeat": bool(h) and h in hashes[:i],  # the conversation sent this prompt before
        }
        for i, (r, h) in enumerate(zip(found, hashes, strict=True))
    ]
    columns = [
        Column("n", "#", "int"),
        Column("record_id", _("Record"), "text"),
        Column("ts", _("Time"), "datetime"),
        Column("model", _("Model"), "text"),
        Column("step", label("step"), "text"),
        Column("status", _("Status"), "text"),
        Column("attempt", _("Attempt"), "int"),
        Column("hash", _("Prompt hash"), "text"),
        Column("prompt", _("Prompt"), "int"),
        Column("completion", _("Completion"), "int"),
        *cost_columns(currencies),
    ]
    for row in rows:
        row.update(step=row["record"].dims.dims.get("step", ""), attempt=row["record"].attempt)
    rows, sort = sorted_as_asked(request, rows, [c.key for c in columns], Sort("n", False))
    table = Table("conversation", _("Conversation"), columns, rows, period=_period(flt))
    name = file_name("conversation", conversation_id, flt, sort=sort.param)
    found_download = download(request, table, name)
    if found_download is not None:
        return found_download
    return {
        "rows": rows,
        "sort": sort,
        "currencies": cost_totals(rows, currencies),
        "table_name": table.name,
        "repeats": sum(1 for row in rows if row["repeat"]),
    }


def _linked(flt: Filters, record: Record | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {"record": record, "href": reverse("dashboards:record") + _record_query(flt, record)}


def _same_prompt_href(flt: Filters, record: Record) -> str:
    """The duplicates of the record's prompt hash around it: the window reaches from its ts back
    and forth by a day, whatever window the reader came from."""
    if record.prompt_hash is None:
        return ""
    around = Filters(record.ts - selectors.AROUND, record.ts + selectors.AROUND, "", {})
    return (
        reverse("dashboards:duplicates") + around.query() + "&" + urlencode({"hash": bytes(record.prompt_hash).hex()})
    )
