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
from apps.classification.health import threshold_table
from apps.classification.models import HourlyClass, Reason
from apps.common.buckets import (
    day_of,
    day_start,
    hour_floor,
    iso_local,
    month_end,
    month_of,
    month_start,
    zone_name,
)
from apps.common.composed import SQL, Composable, table, text
from apps.ingest.models import DimSet, HourlyUsage, Rejection, ServedModel
from apps.pricing.models import HourlyCost

HOUR = timedelta(hours=1)
TOKENS = SQL("(u.prompt + u.completion)")
_USAGE, _DIMS, _MODELS = table(HourlyUsage), table(DimSet), table(ServedModel)
NOTHING = SQL("")


def _rows(statement: Composable, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(text(statement), params)
        return cursor.fetchall()


# The pages alerts lead to: what a receiver of the channel can open (never an API or the admin).
OVERVIEW, WASTE, COLLECTORS, FINANCE = "/overview/", "/waste/", "/collectors/", "/finance/"


def page_link(
    page: str = OVERVIEW,
    *,
    start: datetime,
    end: datetime,
    business_line: str = "",
    model: str = "",
    dims: tuple[tuple[str, str], ...] = (),
) -> str:
    """A dashboard page filtered to the window (instants to the hour, in the accounting zone)
    and the subject's business line, model and dims (a caller's, a user's)."""
    query = {"from": iso_local(start), "to": iso_local(end)}
    if business_line:
        query["dims.business_line"] = business_line
    query.update({f"dims.{dim}": value for dim, value in dims})
    if model:
        query["model"] = model
    return f"{page}?{urlencode(query)}"


def finance_link(month: datetime | Any) -> str:
    return f"{FINANCE}?month={month:%Y-%m}"


def _line_filter(business_line: str, params: list[Any]) -> Composable:
    if not business_line:
        return NOTHING
    params.append(business_line)
    return SQL(" AND d.business_line = %s")


def spike_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    """Each subject's tokens this hour and in the same hour of the weeks before. The rule's `by`
    names the subject: "business_line" (each line), "model" (each model, of the rule's line or
    all), or a rollup dim (settings.ROLLUP_DIMS: "caller", "team", a user id the operator rolls
    up): each of its values within each business line, records without it left out."""
    from apps.alerts.detectors.usage import SpikeInput

    by = params["by"]
    problem = spike_by_problem(by)
    if problem:
        raise ValueError(problem)
    hour = hour_floor(now)
    hours = [hour - timedelta(weeks=k) for k in range(params["weeks"] + 1)]
    series: dict[tuple[str, str], dict[datetime, int]] = defaultdict(dict)
    for line, name, at, tokens in _rows(*spike_query(by=by, business_line=business_line, hours=hours)):
        series[(line, name)][at] = int(tokens)
    elapsed = min(max((now - hour) / HOUR, 1e-6), 1.0)
    for (line, name), by_hour in series.items():
        model = name if by == "model" else ""
        dims = ((by, name),) if by not in ("model", "business_line") else ()
        link = page_link(start=hour, end=hour + HOUR, business_line=line, model=model, dims=dims)
        window = (hour, hour + HOUR)
        subject = Subject(_spike_key(by, name, line), line, link, model, window, "tokens", dims)
        yield subject, SpikeInput(by_hour.get(hour, 0), [by_hour.get(h, 0) for h in hours[1:]], elapsed)


def spike_query(*, by: str, business_line: str, hours: list[datetime]) -> tuple[Composable, list[Any]]:
    """Tokens of each (business line, subject) at each of `hours`: the subject is the model, the
    line itself, or a rollup dim's value (rows without the dim left out)."""
    params: list[Any] = []
    if by == "model":
        group = SQL("%s::text, m.name")
        params.append(business_line)
    elif by == "business_line":
        group = SQL("d.business_line, d.business_line")
    else:
        group = SQL("d.business_line, d.dims ->> %s")
        params.append(by)
    params.append(hours)
    if by == "model" or business_line:
        where = _line_filter(business_line, params)
    else:
        where = SQL(" AND d.business_line <> ''")
    if by not in ("model", "business_line"):
        where = SQL("{} AND coalesce(d.dims ->> %s, '') <> ''").format(where)
        params.append(by)
    statement = SQL(
        "SELECT {group}, u.hour, sum({tokens})::bigint FROM {usage} u "
        "JOIN {dims} d ON d.id = u.dims_id JOIN {models} m ON m.id = u.model_id "
        "WHERE u.hour = ANY(%s){where} GROUP BY 1, 2, 3"
    ).format(group=group, tokens=TOKENS, usage=_USAGE, dims=_DIMS, models=_MODELS, where=where)
    return statement, params


def spike_by_problem(by: Any) -> str:
    """What is wrong with a spike rule's `by`, in words ("" where nothing is)."""
    from django.conf import settings

    if by in ("business_line", "model") or (isinstance(by, str) and by in settings.ROLLUP_DIMS):
        return ""
    dims = ", ".join(d for d in settings.ROLLUP_DIMS if d != "business_line")
    return (
        f"a spike is measured by business_line, model or a dim the hourly rollup keeps ({dims}; "
        f"COSTPLATFORM_ROLLUP_DIMS adds one), not by {by!r}"
    )


def _spike_key(by: str, name: str, line: str) -> str:
    """The subject as alerts name it: "search", "model qwen", "caller web-app (search)"."""
    if by == "business_line":
        return name
    if by == "model":
        return f"model {name}"
    return f"{by} {name} ({line})"


def unit_cost_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    # Accounting days: a day's rows are its UTC hours between two local midnights.
    local_today = day_of(now)
    today = day_start(local_today)
    days = [day_start(local_today - timedelta(days=k)) for k in range(params["days"] + 1, 0, -1)]
    sql_params: list[Any] = [zone_name(), days[0], today]
    sql = SQL(
        "SELECT d.business_line, c.currency, date_trunc('day', c.hour, %s), sum(c.cost), sum(c.tokens) "
        "FROM {costs} c JOIN {dims} d ON d.id = c.dims_id "
        "WHERE c.hour >= %s AND c.hour < %s{where} GROUP BY 1, 2, 3"
    ).format(costs=table(HourlyCost), dims=_DIMS, where=_line_filter(business_line, sql_params))
    per_1k: dict[tuple[str, str], dict[datetime, Decimal]] = defaultdict(dict)
    for line, currency, day, cost, tokens in _rows(sql, sql_params):
        if tokens:
            per_1k[(line, currency)][day] = cost * 1000 / tokens
    for (line, currency), by_day in per_1k.items():
        tail: list[Decimal] = []
        for day in days:  # only the days after the last day without tokens count
            tail = [*tail, by_day[day]] if day in by_day else []
        link = page_link(start=days[0], end=today, business_line=line)
        key = f"{line or '(unattributed)'} {currency}"
        yield Subject(key=key, business_line=line, link=link, window=(days[0], today)), tail


def _month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """The accounting month holding `now`, as instants."""
    month = month_of(now)
    return month_start(month), month_end(month)


def budget_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    """Each budget of the month, a business line's own and those of its teams, callers and dim
    values (`user=u-42`), with what it has used (apps.plans.budget_state, the figures the edge and
    the budgets page read): a money budget in its currency, a token budget as "<scope> tokens".
    A line's budget links to the finance page; a narrower one to the overview filtered to its
    line and dims over the month so far (the finance page shows lines only)."""
    from apps.alerts.detectors.money import BudgetInput
    from apps.plans.budget_state import budget_states

    start, end = _month_bounds(now)
    states = budget_states(now=now, business_lines=[business_line] if business_line else None)
    elapsed = (now - start) / (end - start)
    window = (start, hour_floor(now) + HOUR)
    for b in states:
        scoped = (("team", b.team), ("caller", b.caller), (b.dim, b.value))
        dims = tuple((dim, value) for dim, value in scoped if value)
        link = page_link(start=start, end=window[1], business_line=b.business_line, dims=dims)
        link = link if dims else finance_link(month_of(now))
        if b.amount is not None:
            subject = Subject(b.scope, b.business_line, link, window=window, rank_by="cost", dims=dims)
            yield subject, BudgetInput(b.used_amount, b.amount, elapsed, b.currency)
        if b.tokens is not None:
            subject = Subject(f"{b.scope} tokens", b.business_line, link, window=window, rank_by="tokens", dims=dims)
            yield subject, BudgetInput(Decimal(b.used_tokens), Decimal(b.tokens), elapsed, "tokens")


def health_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    """Each business line's tokens by reason and its prompt over the window, with its thresholds."""
    from apps.alerts.detectors.money import HealthInput

    end = hour_floor(now) + HOUR
    start = end - params["window_hours"] * HOUR
    sql_params: list[Any] = [start, end]
    line_filter = _line_filter(business_line, sql_params)
    sql = SQL(
        "SELECT d.business_line, r.name, sum(c.tokens) FROM {classes} c "
        "JOIN {reasons} r ON r.id = c.reason_id JOIN {dims} d ON d.id = c.dims_id "
        "WHERE c.hour >= %s AND c.hour < %s{where} GROUP BY 1, 2"
    ).format(classes=table(HourlyClass), reasons=table(Reason), dims=_DIMS, where=line_filter)
    reasons: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for line, reason, tokens in _rows(sql, sql_params):
        reasons[line][reason] += int(tokens)
    sql = SQL(
        "SELECT d.business_line, sum(u.prompt), sum(u.prompt_cached) FROM {usage} u "
        "JOIN {dims} d ON d.id = u.dims_id WHERE u.hour >= %s AND u.hour < %s{where} GROUP BY 1"
    ).format(usage=_USAGE, dims=_DIMS, where=line_filter)
    prompts = {line: (int(p), int(c)) for line, p, c in _rows(sql, sql_params)}
    thresholds = threshold_table()
    for line, by_reason in reasons.items():
        if not line:
            continue  # unattributed tokens have a detector of their own
        by_class: dict[str, int] = defaultdict(int)
        for reason, tokens in by_reason.items():
            by_class[reason.split(".", 1)[0]] += tokens
        prompt, cached = prompts.get(line, (0, 0))
        data = HealthInput(dict(by_class), prompt, cached, thresholds.of(line), dict(by_reason))
        link = page_link(start=start, end=end, business_line=line)
        yield Subject(key=line, business_line=line, link=link, window=(start, end), rank_by="waste"), data


def _windows(now: datetime, params: Params) -> tuple[datetime, timedelta]:
    width = params["window_hours"] * HOUR
    return now - width * (params["windows"] + 1), width


def unattributed_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.usage import ShareInput

    start, width = _windows(now, params)
    sql = SQL(
        "SELECT floor(extract(epoch FROM (%s - u.hour)) / %s)::int, "
        "sum({tokens}) FILTER (WHERE d.business_line = ''), sum({tokens}) "
        "FROM {usage} u JOIN {dims} d ON d.id = u.dims_id "
        "WHERE u.hour >= %s GROUP BY 1"
    ).format(tokens=TOKENS, usage=_USAGE, dims=_DIMS)
    shares = {
        int(w): float((none or 0) / total)
        for w, none, total in _rows(sql, [now, width.total_seconds(), start])
        if total
    }
    if 0 in shares:
        previous = [shares.get(w, 0.0) for w in range(1, params["windows"] + 1)]
        window = (now - width, now)
        link = page_link(start=hour_floor(now - width), end=hour_floor(now) + HOUR)
        yield Subject(key="unattributed", link=link, window=window), ShareInput(shares[0], previous)


def rejection_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.alerts.detectors.ops import CountInput

    start, width = _windows(now, params)
    sql = SQL(
        "SELECT floor(extract(epoch FROM (%s - received_at)) / %s)::int, count(*) FROM {rejections} "
        "WHERE received_at >= %s GROUP BY 1"
    ).format(rejections=table(Rejection))
    counts = {int(w): int(n) for w, n in _rows(sql, [now, width.total_seconds(), start])}
    previous = [counts.get(w, 0) for w in range(1, params["windows"] + 1)]
    subject = Subject(key="rejections", link=COLLECTORS, window=(now - width, now))
    yield subject, CountInput(counts.get(0, 0), previous)


def collector_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.accounts.models import CollectorKey
    from apps.alerts.detectors.ops import SeenInput

    recent = now - timedelta(days=params["lookback_days"])
    for key in CollectorKey.objects.filter(revoked_at__isnull=True, last_seen_at__gte=recent):
        assert key.last_seen_at is not None
        yield Subject(key=key.name, link=COLLECTORS), SeenInput(key.last_seen_at, now)


def finding_series(*, params: Params, business_line: str, now: datetime) -> Iterator[tuple[Subject, Any]]:
    from apps.ledger.models import Finding

    findings = Finding.objects.filter(delivered_at__isnull=True).order_by("id")
    if business_line:
        findings = findings.filter(business_line=business_line)
    for f in findings:
        key = f"{f.period:%Y-%m} {f.kind} {f.business_line or '(all)'}"
        subject = Subject(key=key, business_line=f.business_line, link=finance_link(f.period))
        yield (
            subject,
            {
                "id": f.id,
                "message": f.message,
                "period": f"{f.period:%Y-%m}",
                **f.figures,
                "kind": f.kind,
                "business_line": f.business_line,
            },
        )


# What a firing subject's window is ranked by, to name its top contributors: a table, the
# value summed, and a condition on it.
CONTRIBUTORS: dict[str, tuple[Composable, Composable, Composable]] = {
    "tokens": (_USAGE, TOKENS, NOTHING),
    "waste": (
        table(HourlyClass),
        SQL("u.tokens"),
        SQL(" AND u.reason_id IN (SELECT id FROM {} WHERE split_part(name, '.', 1) IN ('waste', 'shadow'))").format(
            table(Reason)
        ),
    ),
    "cost": (table(HourlyCost), SQL("u.cost"), NOTHING),
}


def contributors_query(*, subject: Subject) -> tuple[Composable, list[Any]]:
    """(model, feature, step, the subject's `rank_by` summed) over its window, line, model and dims."""
    assert subject.window is not None
    rollup, value, condition = CONTRIBUTORS[subject.rank_by]
    params: list[Any] = [subject.window[0], subject.window[1]]
    where = [_line_filter(subject.business_line, params)]
    if subject.model:
        where.append(SQL(" AND m.name = %s"))
        params.append(subject.model)
    for dim, dim_value in subject.dims:
        where.append(SQL(" AND d.dims->>%s = %s"))
        params += [dim, dim_value]
    statement = SQL(
        "SELECT m.name, coalesce(d.dims->>'feature', ''), coalesce(d.dims->>'step', ''), sum({value}) "
        "FROM {rollup} u JOIN {dims} d ON d.id = u.dims_id JOIN {models} m ON m.id = u.model_id "
        "WHERE u.hour >= %s AND u.hour < %s{where}{condition} GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3"
    ).format(value=value, rollup=rollup, dims=_DIMS, models=_MODELS, where=SQL("").join(where), condition=condition)
    return statement, params


def contributors_top(*, subject: Subject, top: int = 3) -> list[dict[str, Any]]:
    """The `top` (model, feature, step) of the subject's window by its `rank_by`, with their share."""
    if subject.window is None or subject.rank_by not in CONTRIBUTORS:
        return []
    found = _rows(*contributors_query(subject=subject))
    rows = [(model, feature, step, Decimal(amount)) for model, feature, step, amount in found]
    total = sum((amount for *_, amount in rows), Decimal(0))
    if total <= 0:
        return []
    return [
        {"model": model, "feature": feature, "step": step, "share": round(float(amount / total), 4)}
        for model, feature, step, amount in rows[:top]
        if amount > 0
    ]
