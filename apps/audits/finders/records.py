"""Findings that need the individual requests: each is one GROUP BY pass over the month's
partition of ingest_record (the ts range prunes to it), keeping only what HAVING lets through,
so what reaches Python is a few rows per finding, never records."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

from apps.audits import conf
from apps.audits.finders.base import (
    KIND_TOKENS,
    MONTH,
    ROLLUP_JOIN,
    AuditWindow,
    Draft,
    ModelTokens,
    Tokens,
    all_saved,
    evidence_url,
    fetch_month,
    label,
    named,
    pct,
    register_finder,
    share,
)
from apps.audits.models import FindingKind, ModelDowngrade
from apps.common.buckets import hour_floor_sql, hour_origin
from apps.common.composed import SQL, table, text
from apps.ingest.models import DimSet, Record, ServedModel

# Per (rollup dims, model, prompt hash) of ok requests: how many requests and how many distinct
# "units" asked it (a conversation is one unit, a request without one is its own); repeats
# across units are cacheable duplicates, repeats inside one conversation are the loop finder's.
_DUPLICATES_SQL = text(
    SQL("""
WITH h AS (
    SELECT d.rollup_id, r.model_id, count(*) AS n,
           count(DISTINCT d.conv) + count(*) FILTER (WHERE d.conv IS NULL) AS units,
           sum(r.prompt - r.prompt_cached - r.prompt_cache_write) AS u, sum(r.prompt_cached) AS c,
           sum(r.completion) AS o, sum(r.prompt_cache_write) AS w
    FROM {records} r
    JOIN (SELECT id, coalesce(rollup_id, id) AS rollup_id, dims ->> 'conversation_id' AS conv
          FROM {dims}) d ON d.id = r.dims_id
    WHERE {month} AND r.status = 0 AND r.prompt_hash IS NOT NULL
    GROUP BY d.rollup_id, r.model_id, r.prompt_hash
    HAVING count(*) > 1
)
SELECT rollup_id, model_id, count(*), sum(n)::bigint, sum(units - 1)::bigint,
       sum(u * (units - 1) / n)::bigint, sum(c * (units - 1) / n)::bigint, sum(o * (units - 1) / n)::bigint,
       sum(w * (units - 1) / n)::bigint
FROM h
WHERE units > 1
GROUP BY rollup_id, model_id
""").format(records=table(Record), dims=table(DimSet), month=SQL(MONTH))
)


def _grouped(rows: list[tuple[Any, ...]]) -> dict[int, list[tuple[Any, ...]]]:
    by_rollup: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_rollup[row[0]].append(row)
    return by_rollup


@register_finder(FindingKind.DUPLICATE)
def duplicates(window: AuditWindow) -> list[Draft]:
    rows = fetch_month(window, _DUPLICATES_SQL)
    dims, names = named(rows)
    drafts = []
    for rollup_id, group in _grouped(rows).items():
        repeats = sum(int(r[4]) for r in group)
        saved: ModelTokens = {names[r[1]]: Tokens.of(r[5:9]) for r in group}
        saved_tokens = sum(t.total for t in saved.values())
        if repeats < conf.get("AUDIT_DUPLICATE_MIN_REPEATS") or saved_tokens < conf.get("AUDIT_MIN_TOKENS"):
            continue
        where = dims[rollup_id]
        drafts.append(
            Draft(
                kind=FindingKind.DUPLICATE,
                title=f"Duplicate computation: {repeats:,} repeated prompts in {label(where)}",
                dims=where,
                **all_saved(window, saved),
                evidence=evidence_url(window, where, next(iter(saved)) if len(saved) == 1 else ""),
                suggestion=(
                    "The same prompts were computed again for other users and conversations: cache the "
                    "responses by prompt hash (a response cache in front of the model, with an expiry that "
                    "fits the content), or deduplicate the requests where they are sent."
                ),
                figures={
                    "prompt_hashes": sum(int(r[2]) for r in group),
                    "requests": sum(int(r[3]) for r in group),
                    "repeats": repeats,
                },
            )
        )
    return drafts


# Per (conversation, rollup dims, model, prompt hash): the calls; a conversation is a loop when
# it has many calls and a large share of them repeat a prompt hash it already sent.
_LOOPS_SQL = text(
    SQL("""
WITH h AS (
    SELECT d.conv, d.rollup_id, r.model_id, r.prompt_hash IS NOT NULL AS hashed, count(*) AS n,
           sum(r.prompt - r.prompt_cached - r.prompt_cache_write) AS u, sum(r.prompt_cached) AS c,
           sum(r.completion) AS o, sum(r.prompt_cache_write) AS w
    FROM {records} r
    JOIN (SELECT id, coalesce(rollup_id, id) AS rollup_id, dims ->> 'conversation_id' AS conv
          FROM {dims} WHERE dims ? 'conversation_id') d ON d.id = r.dims_id
    WHERE r.ts >= %(start)s AND r.ts < %(end)s
    GROUP BY d.conv, d.rollup_id, r.model_id, r.prompt_hash
), conv AS (
    SELECT conv FROM h GROUP BY conv
    HAVING sum(n) >= %(min_calls)s
       AND sum(n - 1) FILTER (WHERE hashed) >= %(min_share)s * sum(n)
)
SELECT h.rollup_id, h.model_id, h.conv, sum(h.n)::bigint, coalesce(sum(h.n - 1) FILTER (WHERE h.hashed), 0)::bigint,
       coalesce(sum(h.u * (h.n - 1) / h.n) FILTER (WHERE h.hashed), 0)::bigint,
       coalesce(sum(h.c * (h.n - 1) / h.n) FILTER (WHERE h.hashed), 0)::bigint,
       coalesce(sum(h.o * (h.n - 1) / h.n) FILTER (WHERE h.hashed), 0)::bigint,
       coalesce(sum(h.w * (h.n - 1) / h.n) FILTER (WHERE h.hashed), 0)::bigint,
       sum(h.u + h.c + h.o + h.w)::bigint
FROM h JOIN conv USING (conv)
GROUP BY h.rollup_id, h.model_id, h.conv
""").format(records=table(Record), dims=table(DimSet))
)


@register_finder(FindingKind.LOOP)
def loops(window: AuditWindow) -> list[Draft]:
    rows = fetch_month(
        window,
        _LOOPS_SQL,
        min_calls=conf.get("AUDIT_LOOP_MIN_CALLS"),
        min_share=conf.get("AUDIT_LOOP_MIN_REPEAT_SHARE"),
    )
    dims, names = named(rows)
    drafts = []
    for rollup_id, group in _grouped(rows).items():
        saved: ModelTokens = defaultdict(Tokens)
        calls: dict[str, int] = defaultdict(int)
        for row in group:
            saved[names[row[1]]] += Tokens.of(row[5:9])
            calls[row[2]] += int(row[3])
        saved_tokens = sum(t.total for t in saved.values())
        if saved_tokens < conf.get("AUDIT_MIN_TOKENS"):
            continue
        where, worst = dims[rollup_id], max(calls, key=lambda c: (calls[c], c))
        repeats = sum(int(r[4]) for r in group)
        drafts.append(
            Draft(
                kind=FindingKind.LOOP,
                title=f"Agent loops: {len(calls)} conversations repeating their own calls in {label(where)}",
                dims=where,
                model=", ".join(sorted(saved)),
                tokens=sum(int(r[9]) for r in group),
                savings_tokens=saved_tokens,
                savings=window.rates.money_of(dict(saved)),
                evidence=evidence_url(window, where | {"conversation_id": worst}),
                suggestion=(
                    "Conversations sent the same prompt again and again (the agent re-plans or re-calls a tool "
                    "in a loop): cap the steps per task, detect a repeated step and stop or escalate, and cache "
                    "tool results within the conversation."
                ),
                figures={
                    "conversations": len(calls),
                    "calls": sum(calls.values()),
                    "repeated_calls": repeats,
                    "worst": sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))[:5],
                },
            )
        )
    return drafts


# Per hour, rollup dims and model: requests, retries, and the tokens of failed requests; a storm
# hour has many retries that are a large share of the workload's requests.
_RETRIES = SQL("""
WITH h AS (
    SELECT {hour} AS hour, d.rollup_id, r.model_id, count(*) AS n,
           count(*) FILTER (WHERE r.attempt > 1 OR r.retry_of IS NOT NULL) AS retries,
           sum(r.prompt - r.prompt_cached - r.prompt_cache_write) FILTER (WHERE r.status <> 0) AS u,
           sum(r.prompt_cached) FILTER (WHERE r.status <> 0) AS c,
           sum(r.completion) FILTER (WHERE r.status <> 0) AS o,
           sum(r.prompt_cache_write) FILTER (WHERE r.status <> 0) AS w
    FROM {records} r {rollup_join}
    WHERE {month}
    GROUP BY 1, 2, 3
)
SELECT rollup_id, model_id, count(*), sum(n)::bigint, sum(retries)::bigint,
       coalesce(sum(u), 0)::bigint, coalesce(sum(c), 0)::bigint, coalesce(sum(o), 0)::bigint,
       coalesce(sum(w), 0)::bigint, min(hour), max(hour)
FROM h
WHERE retries >= %(min_retries)s AND retries >= %(min_share)s * n
GROUP BY rollup_id, model_id
""")


@lru_cache(maxsize=4)
def _retries_sql(origin: timedelta) -> str:
    """The retry storms' statement in the hour buckets starting `origin` past each UTC hour."""
    return text(
        _RETRIES.format(
            hour=SQL(hour_floor_sql("r.ts")), records=table(Record), rollup_join=SQL(ROLLUP_JOIN), month=SQL(MONTH)
        )
    )


@register_finder(FindingKind.RETRY_STORM)
def retry_storms(window: AuditWindow) -> list[Draft]:
    rows = fetch_month(
        window,
        _retries_sql(hour_origin()),
        min_retries=conf.get("AUDIT_RETRY_MIN_PER_HOUR"),
        min_share=conf.get("AUDIT_RETRY_MIN_SHARE"),
    )
    dims, names = named(rows)
    drafts = []
    for rollup_id, group in _grouped(rows).items():
        wasted: ModelTokens = {names[r[1]]: Tokens.of(r[5:9]) for r in group}
        wasted_tokens = sum(t.total for t in wasted.values())
        if wasted_tokens < conf.get("AUDIT_MIN_TOKENS"):
            continue
        where = dims[rollup_id]
        hours, retries = sum(int(r[2]) for r in group), sum(int(r[4]) for r in group)
        drafts.append(
            Draft(
                kind=FindingKind.RETRY_STORM,
                title=f"Retry storms: {retries:,} retries in {hours} hours in {label(where)}",
                dims=where,
                **all_saved(window, wasted),
                evidence=evidence_url(window, where, status="error"),
                suggestion=(
                    "Failed requests were retried in bursts and their tokens bought nothing: retry with "
                    "exponential backoff and jitter, cap the attempts, and open a circuit breaker (degrade to a "
                    "smaller model or a cached answer) when the downstream keeps failing."
                ),
                figures={
                    "storm_hours": hours,
                    "requests": sum(int(r[3]) for r in group),
                    "retries": retries,
                    "first_hour": min(r[9] for r in group).isoformat(),
                    "last_hour": max(r[10] for r in group).isoformat(),
                },
            )
        )
    return drafts


# Per rollup dims and large model: its requests, and those within the configured small model's
# limits (ok requests with short prompts and completions), with their tokens by kind.
_MISMATCH_SQL = text(
    SQL("""
SELECT d.rollup_id, r.model_id, count(*)::bigint,
       count(*) FILTER (WHERE r.status = 0 AND r.prompt <= m.max_prompt AND r.completion <= m.max_completion)::bigint,
       {kept}
FROM {records} r
JOIN unnest(%(model_ids)s::int[], %(max_prompt)s::int[], %(max_completion)s::int[])
     AS m(model_id, max_prompt, max_completion) ON m.model_id = r.model_id
{rollup_join}
WHERE {month}
GROUP BY 1, 2
""").format(
        kept=SQL(", ").join(
            SQL(
                "coalesce(sum({}) FILTER (WHERE r.status = 0 AND r.prompt <= m.max_prompt "
                "AND r.completion <= m.max_completion), 0)::bigint"
            ).format(SQL(tokens))
            for tokens in KIND_TOKENS
        ),
        records=table(Record),
        rollup_join=SQL(ROLLUP_JOIN),
        month=SQL(MONTH),
    )
)


@register_finder(FindingKind.MODEL_MISMATCH)
def model_mismatch(window: AuditWindow) -> list[Draft]:
    downgrades = {d.large_model: d for d in ModelDowngrade.objects.filter(enabled=True)}
    served = list(ServedModel.objects.filter(name__in=downgrades).values_list("id", "name"))
    if not served:
        return []
    rows = fetch_month(
        window,
        _MISMATCH_SQL,
        model_ids=[pk for pk, _ in served],
        max_prompt=[downgrades[name].max_prompt_tokens for _, name in served],
        max_completion=[downgrades[name].max_completion_tokens for _, name in served],
    )
    dims, names = named(rows)
    found: dict[tuple[int, str], list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        found[(row[0], names[row[1]])].append(row)
    drafts = []
    for (rollup_id, large), group in sorted(found.items()):
        draft = _mismatch_draft(window, dims[rollup_id], downgrades[large], group)
        if draft is not None:
            drafts.append(draft)
    return drafts


def _mismatch_draft(
    window: AuditWindow, where: dict[str, str], rule: ModelDowngrade, group: list[tuple[Any, ...]]
) -> Draft | None:
    requests, fitting = sum(int(r[2]) for r in group), sum(int(r[3]) for r in group)
    tokens = Tokens()
    for row in group:
        tokens += Tokens.of(row[4:8])
    fits = share(fitting, requests)
    if fitting < conf.get("AUDIT_MISMATCH_MIN_REQUESTS") or fits < conf.get("AUDIT_MISMATCH_MIN_SHARE"):
        return None
    if tokens.total < conf.get("AUDIT_MIN_TOKENS"):
        return None
    large_cost = window.rates.money(tokens, rule.large_model)
    small_cost = window.rates.money(tokens, rule.small_model)
    savings = None if large_cost is None or small_cost is None else max(large_cost - small_cost, Decimal(0))
    return Draft(
        kind=FindingKind.MODEL_MISMATCH,
        title=f"Model mismatch: {pct(fits)} of {rule.large_model} requests in {label(where)} fit {rule.small_model}",
        dims=where,
        model=rule.large_model,
        tokens=tokens.total,
        savings_tokens=0,
        savings=savings,
        evidence=evidence_url(window, where, rule.large_model),
        suggestion=(
            f"{fitting:,} of {requests:,} requests to {rule.large_model} had at most {rule.max_prompt_tokens} "
            f"prompt and {rule.max_completion_tokens} completion tokens: route such short, simple requests to "
            f"{rule.small_model} (a model router by task or size) and keep {rule.large_model} for the hard ones."
        ),
        figures={"requests": requests, "fitting": fitting, "small_model": rule.small_model},
    )
