"""Findings read from the hourly usage rollup (ingest_hourlyusage): its rows already carry the
rollup dims, the hour and the token columns, so a month is a few hundred thousand rows at most."""

from __future__ import annotations

import math
from collections import defaultdict
from decimal import Decimal
from typing import Any

from apps.audits import conf
from apps.audits.finders.base import (
    AuditWindow,
    Draft,
    ModelTokens,
    Tokens,
    all_saved,
    dims_of,
    evidence_url,
    fetch_month,
    label,
    model_names,
    named,
    pct,
    register_finder,
    share,
)
from apps.audits.models import FindingKind
from apps.classification.engine import REASONING, WASTE_REASONING_OVERSPEND
from apps.classification.models import HourlyClass
from apps.common.buckets import parse_month
from apps.common.composed import SQL, table, text
from apps.ingest.models import HourlyUsage
from apps.ledger.models import Finding
from apps.pricing.models import HourlyCost

_USAGE = table(HourlyUsage)
_USAGE_MONTH = SQL("u.hour >= %(start)s AND u.hour < %(end)s")

# Per rollup dims seen in most hours of the month: its hourly token sums (sum and sum of
# squares for the variation) and its tokens per hour of the day (for the day/night profile).
_ZOMBIE_SQL = text(
    SQL("""
WITH h AS (
    SELECT u.dims_id, u.hour, sum(u.prompt + u.completion) AS t
    FROM {usage} u WHERE {usage_month}
    GROUP BY 1, 2
), s AS (
    SELECT dims_id, count(*) AS active, sum(t) AS total, sum(t::numeric * t) AS sq
    FROM h GROUP BY dims_id HAVING count(*) >= %(min_hours)s
)
SELECT s.dims_id, s.active, s.total, s.sq, extract(hour FROM h.hour AT TIME ZONE 'UTC')::int, sum(h.t)
FROM h JOIN s USING (dims_id)
GROUP BY 1, 2, 3, 4, 5
""").format(usage=_USAGE, usage_month=_USAGE_MONTH)
)
_MODEL_TOKENS_SQL = text(
    SQL("""
SELECT u.dims_id, u.model_id, sum(u.prompt - u.prompt_cached - u.prompt_cache_write), sum(u.prompt_cached),
       sum(u.completion), sum(u.prompt_cache_write)
FROM {usage} u WHERE {usage_month} AND u.dims_id = ANY(%(dims_ids)s)
GROUP BY 1, 2
""").format(usage=_USAGE, usage_month=_USAGE_MONTH)
)


def _diurnal_ratio(by_hour_of_day: dict[int, int]) -> Decimal:
    """Tokens of the busiest 12 hours of the day over the quietest 12 (in UTC, so the ratio
    does not depend on the time zone): ~1 for a job that runs around the clock."""
    ordered = sorted((by_hour_of_day.get(h, 0) for h in range(24)), reverse=True)
    busy, quiet = sum(ordered[:12]), sum(ordered[12:])
    return Decimal(busy) / Decimal(quiet) if quiet else Decimal("Infinity")


def _variation(total: int, squares: Decimal, hours: int) -> Decimal:
    """Coefficient of variation of hourly tokens over all the month's hours (idle hours count as 0)."""
    mean = Decimal(total) / hours
    variance = max(squares / hours - mean * mean, Decimal(0))
    return Decimal(math.sqrt(variance)) / mean if mean else Decimal("Infinity")


def model_tokens(window: AuditWindow, dims_ids: list[int]) -> dict[int, ModelTokens]:
    rows = fetch_month(window, _MODEL_TOKENS_SQL, dims_ids=dims_ids)
    names = model_names(r[1] for r in rows)
    found: dict[int, ModelTokens] = defaultdict(dict)
    for row in rows:
        found[row[0]][names[row[1]]] = Tokens.of(row[2:6])
    return found


@register_finder(FindingKind.ZOMBIE)
def zombies(window: AuditWindow) -> list[Draft]:
    min_hours = math.ceil(window.hours * conf.get("AUDIT_ZOMBIE_ACTIVE_SHARE"))
    rows = fetch_month(window, _ZOMBIE_SQL, min_hours=min_hours)
    stats: dict[int, tuple[int, int, Decimal]] = {}
    profile: dict[int, dict[int, int]] = defaultdict(dict)
    for dims_id, active, total, squares, hour_of_day, tokens in rows:
        stats[dims_id] = (int(active), int(total), Decimal(squares))
        profile[dims_id][hour_of_day] = int(tokens)
    steady = {}
    for dims_id, (active, total, squares) in stats.items():
        cv, ratio = _variation(total, squares, window.hours), _diurnal_ratio(profile[dims_id])
        if cv <= conf.get("AUDIT_ZOMBIE_CV_MAX") and ratio <= conf.get("AUDIT_ZOMBIE_DIURNAL_MAX"):
            steady[dims_id] = {
                "active_hours": active,
                "hours": window.hours,
                "cv": f"{cv:.3f}",
                "diurnal": f"{ratio:.3f}",
            }
    by_model = model_tokens(window, list(steady))
    dims = dims_of(steady)
    drafts = []
    for dims_id, figures in sorted(steady.items()):
        tokens = sum(t.total for t in by_model[dims_id].values())
        if tokens < conf.get("AUDIT_MIN_TOKENS"):
            continue
        where = dims[dims_id]
        drafts.append(
            Draft(
                kind=FindingKind.ZOMBIE,
                title=f"Zombie workload: {label(where)} ran {figures['active_hours']} of {window.hours} hours, "
                "around the clock",
                dims=where,
                **all_saved(window, by_model[dims_id]),
                evidence=evidence_url(window, where),
                suggestion=(
                    "Steady consumption in nearly every hour, with no day/night difference, looks like a "
                    "forgotten job (a test, a load generator, a poller), not people: find its owner, switch it "
                    "off or schedule it, and revoke its key if nobody claims it."
                ),
                figures=figures,
            )
        )
    return drafts


# Per rollup dims and model: prompt, cached and system tokens; the uncached part of the system
# prompt is what the prefix cache did not cover (a system prompt leads the prompt, so it is the
# first part the cache serves).
_SYSTEM_SQL = text(
    SQL("""
SELECT u.dims_id, u.model_id, sum(u.records)::bigint, sum(u.prompt)::bigint, sum(u.system)::bigint,
       sum(greatest(u.system - u.prompt_cached, 0))::bigint
FROM {usage} u WHERE {usage_month}
GROUP BY 1, 2
HAVING sum(u.system) >= %(min_share)s * sum(u.prompt) AND sum(u.prompt) > 0
""").format(usage=_USAGE, usage_month=_USAGE_MONTH)
)


@register_finder(FindingKind.SYSTEM_PROMPT)
def system_prompt(window: AuditWindow) -> list[Draft]:
    rows = fetch_month(window, _SYSTEM_SQL, min_share=conf.get("AUDIT_SYSTEM_SHARE_MIN"))
    dims, names = named(rows)
    drafts = []
    for dims_id, model_id, requests, prompt, system, uncached in rows:
        if uncached < conf.get("AUDIT_MIN_TOKENS"):
            continue
        where, model = dims[dims_id], names[model_id]
        as_input = window.rates.money(Tokens(uncached=uncached), model)
        as_cached = window.rates.money(Tokens(cached=uncached), model)
        drafts.append(
            Draft(
                kind=FindingKind.SYSTEM_PROMPT,
                title=f"System-prompt overhead: {pct(share(system, prompt))} of prompt tokens in {label(where)} "
                f"on {model}, {pct(share(uncached, system))} of them uncached",
                dims=where,
                model=model,
                tokens=system,
                savings_tokens=uncached,
                savings=None if as_input is None or as_cached is None else as_input - as_cached,
                evidence=evidence_url(window, where, model),
                suggestion=(
                    f"About {system // max(requests, 1):,} system tokens were sent with every request: shorten the "
                    "system prompt, keep it byte-identical and first in the prompt so the prefix cache serves it, "
                    "and move rarely needed instructions into retrieval."
                ),
                figures={"requests": requests, "prompt": prompt, "system": system, "system_uncached": uncached},
            )
        )
    return drafts


# Per rollup dims, model and week of the month (days 1-7 are week 0): requests, prompt and tool tokens.
_CONTEXT_SQL = text(
    SQL("""
SELECT u.dims_id, u.model_id, floor(extract(epoch FROM u.hour - %(start)s) / 604800)::int AS week,
       sum(u.records)::bigint, sum(u.prompt)::bigint, sum(u.tool)::bigint
FROM {usage} u WHERE {usage_month} AND u.status = 0
GROUP BY 1, 2, 3
""").format(usage=_USAGE, usage_month=_USAGE_MONTH)
)


@register_finder(FindingKind.CONTEXT_BLOAT)
def context_bloat(window: AuditWindow) -> list[Draft]:
    rows = fetch_month(window, _CONTEXT_SQL)
    weeks: dict[tuple[int, int], dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for dims_id, model_id, week, requests, prompt, tool in rows:
        weeks[(dims_id, model_id)][int(week)] = (int(requests), int(prompt), int(tool))
    dims, names = dims_of(k[0] for k in weeks), model_names(k[1] for k in weeks)
    drafts = []
    for (dims_id, model_id), by_week in sorted(weeks.items()):
        draft = _bloat_draft(window, dims[dims_id], names[model_id], by_week)
        if draft is not None:
            drafts.append(draft)
    return drafts


def _bloat_draft(
    window: AuditWindow, where: dict[str, str], model: str, by_week: dict[int, tuple[int, int, int]]
) -> Draft | None:
    minimum = conf.get("AUDIT_CONTEXT_MIN_WEEK_REQUESTS")
    full = sorted(w for w, (n, _, _) in by_week.items() if n >= minimum)
    if len(full) < 2:
        return None
    prompt, tool = sum(p for _, p, _ in by_week.values()), sum(t for _, _, t in by_week.values())
    first, last = by_week[full[0]], by_week[full[-1]]
    base, latest = Decimal(first[2]) / first[0], Decimal(last[2]) / last[0]
    if share(tool, prompt) < conf.get("AUDIT_CONTEXT_TOOL_SHARE_MIN") or latest < base * conf.get(
        "AUDIT_CONTEXT_GROWTH_MIN"
    ):
        return None
    # What the later weeks sent beyond the first week's tool tokens per request.
    excess = sum(max(int(t - base * n), 0) for w, (n, _, t) in by_week.items() if w != full[0])
    if excess < conf.get("AUDIT_MIN_TOKENS"):
        return None
    return Draft(
        kind=FindingKind.CONTEXT_BLOAT,
        title=f"Context bloat: tool/context tokens per request in {label(where)} on {model} grew "
        f"from {base:,.0f} to {latest:,.0f}",
        dims=where,
        model=model,
        tokens=tool,
        savings_tokens=excess,
        savings=window.rates.money(Tokens(uncached=excess), model),
        evidence=evidence_url(window, where, model),
        suggestion=(
            "Tool results and retrieved context take a growing share of the prompt: inject only the top-k most "
            "relevant chunks (rerank first), truncate or summarise tool output, and summarise turns older than "
            "the last 3-5 instead of resending them."
        ),
        figures={
            "tool_share": f"{share(tool, prompt):.3f}",
            "weeks": {str(w): {"requests": n, "prompt": p, "tool": t} for w, (n, p, t) in sorted(by_week.items())},
        },
    )


# Per rollup dims and model: the reasoning tokens classed waste.reasoning_overspend (by a rule set's
# move rule, with its own N), what they cost as priced (in the month's currency), and all the
# reasoning and completion of the month there, for scale.
_OVERSPEND_SQL = text(
    SQL("""
WITH o AS (
    SELECT c.dims_id, c.model_id, sum(c.tokens)::bigint AS tokens FROM {classes} c
    WHERE c.hour >= %(start)s AND c.hour < %(end)s AND c.reason_id = %(reason)s AND c.component = %(component)s
    GROUP BY 1, 2
), m AS (
    SELECT p.dims_id, p.model_id, sum(p.cost) AS cost FROM {costs} p
    WHERE p.hour >= %(start)s AND p.hour < %(end)s AND p.reason_id = %(reason)s AND p.currency = %(currency)s
    GROUP BY 1, 2
), u AS (
    SELECT u.dims_id, u.model_id, sum(u.reasoning)::bigint AS reasoning, sum(u.completion)::bigint AS completion
    FROM {usage} u WHERE {usage_month} GROUP BY 1, 2
)
SELECT o.dims_id, o.model_id, o.tokens, m.cost, coalesce(u.reasoning, 0), coalesce(u.completion, 0)
FROM o LEFT JOIN m USING (dims_id, model_id) LEFT JOIN u USING (dims_id, model_id)
ORDER BY o.tokens DESC
""").format(classes=table(HourlyClass), costs=table(HourlyCost), usage=_USAGE, usage_month=_USAGE_MONTH)
)


@register_finder(FindingKind.REASONING)
def reasoning_overspend(window: AuditWindow) -> list[Draft]:
    """Reasoning a rule set classed waste.reasoning_overspend (reasoning over N x the answer).
    The saving is an upper bound: capping the reasoning budget removes part of these tokens."""
    params = {"reason": WASTE_REASONING_OVERSPEND, "component": REASONING, "currency": window.rates.currency}
    rows = fetch_month(window, _OVERSPEND_SQL, **params)
    dims, names = named(rows)
    drafts = []
    for dims_id, model_id, tokens, cost, reasoning, completion in rows:
        if tokens < conf.get("AUDIT_MIN_TOKENS"):
            continue
        where, model = dims[dims_id], names[model_id]
        drafts.append(
            Draft(
                kind=FindingKind.REASONING,
                title=f"Reasoning overspend (waste.reasoning_overspend): {tokens:,} reasoning tokens in "
                f"{label(where)} on {model}, {pct(share(reasoning, completion))} of its completion is reasoning",
                dims=where,
                model=model,
                tokens=tokens,
                savings_tokens=tokens,
                savings=cost,
                evidence=evidence_url(window, where, model),
                suggestion=(
                    "Requests here reasoned more than the rule's N times their answer: cap the reasoning budget "
                    "(reasoning effort, max thinking tokens) for this feature, or send its easy requests to a model "
                    "without reasoning. The saving shown is at most these tokens' cost."
                ),
                figures={"overspent": tokens, "reasoning": reasoning, "completion": completion},
            )
        )
    return drafts


@register_finder(FindingKind.LEDGER_CHECK)
def ledger_checks(window: AuditWindow) -> list[Draft]:
    """The ledger's month-end findings, as stored when the month was closed (none while open)."""
    drafts = []
    for finding in Finding.objects.filter(period=parse_month(window.month)).order_by("kind", "business_line"):
        tokens: Any = finding.figures.get("tokens")
        drafts.append(
            Draft(
                kind=FindingKind.LEDGER_CHECK,
                title=f"{finding.get_kind_display()}: {finding.business_line or 'the company'}",
                dims={"business_line": finding.business_line} if finding.business_line else {},
                tokens=sum(tokens.values()) if isinstance(tokens, dict) else 0,
                savings_tokens=0,
                savings=None,
                evidence=f"/finance/?month={window.month}",
                suggestion=finding.message,
                figures=dict(finding.figures)
                | {"action": finding.action, "ledger_kind": finding.kind, "period": f"{finding.period:%Y-%m}"},
                counted=False,
            )
        )
    return drafts
