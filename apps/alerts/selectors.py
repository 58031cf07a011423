"""Reads for the detectors: one query per rule over the hourly rollups, giving each subject's
series. Each `*_series` yields (Subject, input) pairs for the detector of the same name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.db import connection

from apps.alerts.detectors.registry import Params, Subject
from apps.common.buckets import day_of, day_start, hour_floor, month_end, month_of, month_start, zone_name

HOUR = timedelta(hours=1)
TOKENS = "(u.prompt + u.completion)"


def _rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def records_link(*, start: datetime, end: datetime, business_line: str = "", model: str = "") -> str:
    """The drill-down: the records API filtered to the window and the subject."""
    query = {"from": start.isoformat(), "to": end.isoformat()}
    if business_line:
        query["dims.business_line"] = business_line
    if model:
        query["model"] = model
    return f"/api/v1/records?{urlencode(query)}"


def _line_filter(business_line: str, params: list[Any]) -> str:
    if not business_line:
        return ""
    params.append(business_line)
    return " AND d.business_line = %s"


def spike_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.usage import SpikeInput

    hour = hour_floor(now)
    hours = [hour - timedelta(weeks=k) for k in range(params["weeks"] + 1)]
    by_model = params["by"] == "model"
    group = "m.name" if by_model else "d.business_line"
    sql_params: list[Any] = [hours]
    where = _line_filter(business_line, sql_params) if by_model or business_line else " AND d.business_line <> ''"
    sql = (
        f"SELECT {group}, u.hour, sum({TOKENS})::bigint FROM ingest_hourlyusage u "
        "JOIN ingest_dimset d ON d.id = u.dims_id JOIN ingest_servedmodel m ON m.id = u.model_id "
        f"WHERE u.hour = ANY(%s){where} GROUP BY 1, 2"
    )
    series: dict[str, dict[datetime, int]] = defaultdict(dict)
    for name, at, tokens in _rows(sql, sql_params):
        series[name][at] = int(tokens)
    elapsed = min(max((now - hour) / HOUR, 1e-6), 1.0)
    for name, by_hour in series.items():
        line = business_line if by_model else name
        link = records_link(start=hour, end=now, business_line=line, model=name if by_model else "")
        subject = Subject(key=f"model {name}" if by_model else name, business_line=line, link=link)
        yield subject, SpikeInput(by_hour.get(hour, 0), [by_hour.get(h, 0) for h in hours[1:]], elapsed)


def unit_cost_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    # Accounting days: a day's rows are its UTC hours between two local midnights.
    local_today = day_of(now)
    today = day_start(local_today)
    days = [day_start(local_today - timedelta(days=k)) for k in range(params["days"] + 1, 0, -1)]
    sql_params: list[Any] = [zone_name(), days[0], today]
    sql = (
        "SELECT d.business_line, c.currency, date_trunc('day', c.hour, %s), sum(c.cost), sum(c.tokens) "
        "FROM pricing_hourlycost c JOIN ingest_dimset d ON d.id = c.dims_id "
        f"WHERE c.hour >= %s AND c.hour < %s{_line_filter(business_line, sql_params)} GROUP BY 1, 2, 3"
    )
    per_1k: dict[tuple[str, str], dict[datetime, Decimal]] = defaultdict(dict)
    for line, currency, day, cost, tokens in _rows(sql, sql_params):
        if tokens:
            per_1k[(line, currency)][day] = cost * 1000 / tokens
    for (line, currency), by_day in per_1k.items():
        tail: list[Decimal] = []
        for day in days:  # only the days after the last day without tokens count
            tail = [*tail, by_day[day]] if day in by_day else []
        link = records_link(start=days[0], end=today, business_line=line)
        yield Subject(key=f"{line or '(unattributed)'} {currency}", business_line=line, link=link), tail


def _month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """The accounting month holding `now`, as instants."""
    month = month_of(now)
    return month_start(month), month_end(month)


def budget_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.money import BudgetInput
    from apps.ledger.models import Budget

    start, end = _month_bounds(now)
    budgets = Budget.objects.filter(month=month_of(now))
    if business_line:
        budgets = budgets.filter(business_line=business_line)
    if not budgets:
        return
    money: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    sql = (
        "SELECT d.business_line, c.currency, sum(c.cost) FROM pricing_hourlycost c "
        "JOIN ingest_dimset d ON d.id = c.dims_id WHERE c.hour >= %s AND c.hour < %s GROUP BY 1, 2"
    )
    for line, currency, cost in _rows(sql, [start, end]):
        money[(line, currency)] += cost
    tokens: dict[str, Decimal] = {}
    if any(b.tokens is not None for b in budgets):  # a month of usage rows is read only when needed
        sql = (
            f"SELECT d.business_line, sum({TOKENS}) FROM ingest_hourlyusage u "
            "JOIN ingest_dimset d ON d.id = u.dims_id WHERE u.hour >= %s AND u.hour < %s GROUP BY 1"
        )
        tokens = {line: Decimal(total) for line, total in _rows(sql, [start, end])}
    elapsed = (now - start) / (end - start)
    for b in budgets:
        link = records_link(start=start, end=now, business_line=b.business_line)
        if b.amount is not None:
            spent = money.get((b.business_line, b.currency), Decimal(0))
            subject = Subject(key=b.business_line, business_line=b.business_line, link=link)
            yield subject, BudgetInput(spent, b.amount, elapsed, b.currency)
        if b.tokens is not None:
            subject = Subject(key=f"{b.business_line} tokens", business_line=b.business_line, link=link)
            yield subject, BudgetInput(tokens.get(b.business_line, Decimal(0)), Decimal(b.tokens), elapsed, "tokens")


def health_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.money import HealthInput

    end = hour_floor(now) + HOUR
    start = end - params["window_hours"] * HOUR
    sql_params: list[Any] = [start, end]
    line_filter = _line_filter(business_line, sql_params)
    sql = (
        "SELECT d.business_line, split_part(r.name, '.', 1), sum(c.tokens) FROM classification_hourlyclass c "
        "JOIN classification_reason r ON r.id = c.reason_id JOIN ingest_dimset d ON d.id = c.dims_id "
        f"WHERE c.hour >= %s AND c.hour < %s{line_filter} GROUP BY 1, 2"
    )
    classes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for line, token_class, tokens in _rows(sql, sql_params):
        classes[line][token_class] += int(tokens)
    sql = (
        "SELECT d.business_line, sum(u.prompt), sum(u.prompt_cached) FROM ingest_hourlyusage u "
        f"JOIN ingest_dimset d ON d.id = u.dims_id WHERE u.hour >= %s AND u.hour < %s{line_filter} GROUP BY 1"
    )
    prompts = {line: (int(p), int(c)) for line, p, c in _rows(sql, sql_params)}
    for line, by_class in classes.items():
        if not line:
            continue  # unattributed tokens have a detector of their own
        prompt, cached = prompts.get(line, (0, 0))
        total = sum(by_class.values())
        data = HealthInput(total, by_class["effective"], by_class["waste"], by_class["shadow"], prompt, cached)
        yield Subject(key=line, business_line=line, link=records_link(start=start, end=now, business_line=line)), data


def _windows(now: datetime, params: Params) -> tuple[datetime, timedelta]:
    width = params["window_hours"] * HOUR
    return now - width * (params["windows"] + 1), width


def unattributed_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.usage import ShareInput

    start, width = _windows(now, params)
    sql = (
        "SELECT floor(extract(epoch FROM (%s - u.hour)) / %s)::int, "
        f"sum({TOKENS}) FILTER (WHERE d.business_line = ''), sum({TOKENS}) "
        "FROM ingest_hourlyusage u JOIN ingest_dimset d ON d.id = u.dims_id "
        "WHERE u.hour >= %s GROUP BY 1"
    )
    shares = {
        int(w): float((none or 0) / total)
        for w, none, total in _rows(sql, [now, width.total_seconds(), start])
        if total
    }
    if 0 in shares:
        previous = [shares.get(w, 0.0) for w in range(1, params["windows"] + 1)]
        yield (
            Subject(key="unattributed", link=records_link(start=now - width, end=now)),
            ShareInput(shares[0], previous),
        )


def rejection_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.ops import CountInput

    start, width = _windows(now, params)
    sql = (
        "SELECT floor(extract(epoch FROM (%s - received_at)) / %s)::int, count(*) FROM ingest_rejection "
        "WHERE received_at >= %s GROUP BY 1"
    )
    counts = {int(w): int(n) for w, n in _rows(sql, [now, width.total_seconds(), start])}
    previous = [counts.get(w, 0) for w in range(1, params["windows"] + 1)]
    yield Subject(key="rejections", link="/api/v1/rejections"), CountInput(counts.get(0, 0), previous)


def collector_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.accounts.models import CollectorKey
    from apps.alerts.detectors.ops import SeenInput

    recent = now - timedelta(days=params["lookback_days"])
    for key in CollectorKey.objects.filter(revoked_at__isnull=True, last_seen_at__gte=recent):
        assert key.last_seen_at is not None
        yield Subject(key=key.name, link="/admin/accounts/collectorkey/"), SeenInput(key.last_seen_at, now)


def finding_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.ledger.models import Finding

    findings = Finding.objects.filter(delivered_at__isnull=True).order_by("id")
    if business_line:
        findings = findings.filter(business_line=business_line)
    for f in findings:
        key = f"{f.period:%Y-%m} {f.kind} {f.business_line or '(all)'}"
        subject = Subject(key=key, business_line=f.business_line, link=f"/finance/?month={f.period:%Y-%m}")
        yield subject, {"id": f.id, "message": f.message, "period": f"{f.period:%Y-%m}"}
