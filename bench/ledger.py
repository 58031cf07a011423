#!/usr/bin/env python
"""Ledger benchmark: a month of priced hourly rows equivalent to 10,000,000 token records,
then the times of

  close      `period_close` of that month from an empty journal: the journal completed (every
             day accrued: mapping, rounding, posting), the month-end checks, the lock;
             target <= 60 s;
  rerun      `month_accrue` again on the closed month (idempotent: fingerprints, no writes);
  adjust     one day of the closed month re-priced, then `month_accrue`: adjusting entries;
  trial balance, matrix   GET /api/v1/ledger/trial-balance and /matrix for the month through
             the Django test client (the whole DRF stack, in process), median of --requests;
             target <= 200 ms;
  focus      GET /api/v1/exports/focus for the month (the whole CSV).

The hourly rows are written directly in SQL (INSERT ... SELECT over generate_series). Their
shape is that of bench/reclassify.py's catalogue after the rollup: --dim-sets rollup dim sets
(business_line, team, project, feature, step, env) over --business-lines business lines, each
dim set calling 1 or 2 of --models models, from --sources collectors. A combination that
appears in an hour gets one HourlyClass row per (class.reason, component) present, and an
HourlyCost row priced from it: ~10M records a month spread over ~900 combinations give ~15
records per combination-hour, so every combination appears every hour. Some models are priced
by two cost pools (with their idle hours), the rest by a price version (12-decimal costs).
Two business lines have elastic windows and every business line has revenue.

The database named in DATABASE_URL (default costplatform_bench_ledger) is DROPPED and
recreated; its name must contain "bench". Results: bench/results/ledger-<UTC time>.json and
docs/ledger.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

from bench.ingest import checkout_describe, db_recreate, wait_quiet  # noqa: E402  (the path above first)

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/costplatform_bench_ledger"
TARGET_CLOSE_SECONDS = 60.0
TARGET_API_MS = 200.0
RECORDS = 10_000_000
# (class.reason, component, tokens per record, share of combination-hours where it appears)
PARTS = [
    ("cache.prefix_cache", "cached_prompt", 520, 1.0),
    ("effective.input", "uncached_prompt", 680, 1.0),
    ("effective.output", "output", 170, 1.0),
    ("effective.structural", "structural", 30, 0.9),
    ("waste.timeout", "uncached_prompt", 40, 0.5),
    ("waste.truncated", "output", 12, 0.5),
    ("waste.duplicate", "uncached_prompt", 25, 0.4),
    ("waste.padding", "padding", 8, 0.3),
    ("shadow.spec_rejected", "spec_rejected", 15, 0.3),
    ("shadow.recompute", "recomputed", 10, 0.2),
]


def month_days(month: date) -> int:
    return ((month.replace(day=28) + timedelta(days=4)).replace(day=1) - month).days


def catalogue_make(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """The combinations (source, model, dim set), made through the models (dim sets as ingest stores them)."""
    import hashlib

    from apps.accounts.services import collector_key_create
    from apps.ingest.models import DimSet, ServedModel

    rng = random.Random(args.seed)
    sources = [collector_key_create(name=f"vllm-{i}").key.pk for i in range(args.sources)]
    models = [ServedModel.objects.create(name=f"model-{i}", version="").pk for i in range(args.models)]
    lines = [f"line-{i:02d}" for i in range(args.business_lines)]
    combos = []
    for i in range(args.dim_sets):
        dims = {
            "business_line": lines[i % len(lines)],
            "team": f"team-{i % 37}",
            "feature": f"feature-{i}",
            "step": rng.choice(["plan", "retrieve", "reason", "tool"]),
            "env": "prod",
        }
        digest = hashlib.md5(json.dumps(dims, sort_keys=True).encode()).digest()
        dimset = DimSet.objects.create(digest=digest, dims=dims, business_line=dims["business_line"])
        for model in rng.sample(models, rng.choice([1, 1, 2])):
            combos.append((rng.choice(sources), model, dimset.pk))
    return combos


def prices_make(month: date, models: list[int], pool_models: int) -> dict[str, Any]:
    from apps.ingest.models import ServedModel
    from apps.pricing.services import cost_pool_create, price_version_create

    start = datetime.combine(month, datetime.min.time(), UTC) - timedelta(days=31)
    names = dict(ServedModel.objects.filter(pk__in=models).values_list("pk", "name"))
    version = price_version_create(
        effective_from=start,
        prices={
            names[m]: {"input": Decimal("2.5"), "cached_input": Decimal("0.25"), "output": Decimal("7.5")}
            for m in models
        },
    )
    pools = []
    for i in range(2):
        served = [names[m] for m in models[i * pool_models // 2 : (i + 1) * pool_models // 2]]
        pools.append(
            cost_pool_create(
                name=f"pool-{i}",
                gpus=8,
                cost_per_gpu_hour=Decimal("18.50"),
                model_patterns=served,
                capacity=60_000_000,
                effective_from=start,
            )
        )
    return {"version": version.pk, "pools": {p.pk: p.model_patterns for p in pools}, "names": names}


HOURS = "generate_series(%s::timestamptz, %s::timestamptz - interval '1 hour', interval '1 hour') h"
CLASS_SQL = f"""
INSERT INTO classification_hourlyclass (hour, source_id, model_id, dims_id, ruleset_id, reason_id, component, tokens)
SELECT h, c.source_id, c.model_id, c.dims_id, %s, p.reason_id, p.component,
       greatest(1, (p.tokens * (0.5 + random()))::bigint)
FROM {HOURS} CROSS JOIN combo c CROSS JOIN part p WHERE random() < p.p
"""
# Book rows at the version's prices (12 places), pool rows at a weighted share (2 places).
COST_SQL = """
INSERT INTO pricing_hourlycost (hour, source_id, model_id, dims_id, reason_id, component, tokens, cost, currency,
                                price_version_id, pool_id)
SELECT h.hour, h.source_id, h.model_id, h.dims_id, h.reason_id, h.component, h.tokens,
       CASE WHEN c.pool_id IS NULL
            THEN h.tokens * (CASE p.kind WHEN 'input' THEN 2.5 WHEN 'cached_input' THEN 0.25 ELSE 7.5 END) * 0.000001
            ELSE round(h.tokens * (CASE p.kind WHEN 'cached_input' THEN 0.1 WHEN 'output' THEN 4 ELSE 1 END)
                       * 0.00002, 2)
       END,
       'CNY', CASE WHEN c.pool_id IS NULL THEN %s END, c.pool_id
FROM classification_hourlyclass h JOIN combo c USING (source_id, model_id, dims_id)
JOIN part p USING (reason_id, component)
"""
IDLE_SQL = f"""
INSERT INTO pricing_poolidlehour (pool_id, hour, currency, pool_cost, allocated, idle, weighted_tokens, utilisation)
SELECT p.id, h, 'CNY', greatest(148.00, coalesce(a.cost, 0)), coalesce(a.cost, 0),
       greatest(148.00, coalesce(a.cost, 0)) - coalesce(a.cost, 0), 0, coalesce(a.cost, 0) / 148.00
FROM pricing_costpool p CROSS JOIN {HOURS}
LEFT JOIN (SELECT pool_id, hour, sum(cost) AS cost FROM pricing_hourlycost WHERE pool_id IS NOT NULL GROUP BY 1, 2) a
  ON a.pool_id = p.id AND a.hour = h
"""


def rows_generate(
    month: date, combos: list[tuple[int, int, int]], priced: dict[str, Any], records: int
) -> dict[str, int]:
    """HourlyClass, HourlyCost and PoolIdleHour rows of the month, in SQL."""
    from django.db import connection

    from apps.classification.engine import COMPONENTS
    from apps.classification.models import Reason, RuleSet

    reasons = dict(Reason.objects.values_list("name", "pk"))
    ruleset = RuleSet.objects.get(status="active").pk
    hours = month_days(month) * 24
    per_combo_hour = records / (len(combos) * hours)
    pool_of = {
        m: pool
        for pool, patterns in priced["pools"].items()
        for n in patterns
        for m, name in priced["names"].items()
        if name == n
    }
    start = datetime.combine(month, datetime.min.time(), UTC)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE combo (source_id bigint, model_id int, dims_id int, pool_id bigint)")
        cursor.execute(
            "INSERT INTO combo SELECT * FROM unnest(%s::bigint[], %s::int[], %s::int[], %s::bigint[])",
            [
                [c[0] for c in combos],
                [c[1] for c in combos],
                [c[2] for c in combos],
                [pool_of.get(c[1]) for c in combos],
            ],
        )
        cursor.execute(
            "CREATE TEMP TABLE part (reason_id smallint, component smallint, tokens float8, p float8, kind text)"
        )
        from apps.classification.engine import COMPONENT_KIND

        cursor.executemany(
            "INSERT INTO part VALUES (%s, %s, %s, %s, %s)",
            [
                (reasons[r], COMPONENTS.index(c), t * per_combo_hour, p, COMPONENT_KIND[COMPONENTS.index(c)])
                for r, c, t, p in PARTS
            ],
        )
        for day in range(month_days(month)):  # a day per statement keeps the sort memory small
            cursor.execute(CLASS_SQL, [ruleset, start + timedelta(days=day), start + timedelta(days=day + 1)])
        cursor.execute(COST_SQL, [priced["version"]])
        cursor.execute(IDLE_SQL, [start, start + timedelta(days=month_days(month))])
        cursor.execute("VACUUM ANALYZE classification_hourlyclass")
        cursor.execute("VACUUM ANALYZE pricing_hourlycost")
        cursor.execute("VACUUM ANALYZE pricing_poolidlehour")
        counts = {}
        for table in ("classification_hourlyclass", "pricing_hourlycost", "pricing_poolidlehour"):
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts[table] = cursor.fetchone()[0]
    return counts


def plans_make(month: date, args: argparse.Namespace) -> None:
    from apps.ledger.models import ElasticWindow
    from apps.plans.planning import budget_set, revenue_set

    start = datetime.combine(month, datetime.min.time(), UTC)
    for i in range(2):
        ElasticWindow.objects.create(business_line=f"line-{i:02d}", name="campaign", start=start + timedelta(days=10),
                                     end=start + timedelta(days=12))  # fmt: skip
    for i in range(args.business_lines):
        revenue_set(business_line=f"line-{i:02d}", month=month, amount=Decimal("250000.00"), currency="CNY")
        budget_set(
            business_line=f"line-{i:02d}", month=month, amount=Decimal("20000.00"), currency="CNY", tokens=10**10
        )


def reprice_one_day(month: date) -> dict[str, Any]:
    """The 15th of the closed month re-priced (+10 %, rows rewritten as pricing does), then
    accrued: an adjusting entry for it and, as the rounding carry moved, for later days' cents."""
    from django.db import connection

    from apps.ledger.models import JournalEntry
    from apps.ledger.services.accrual import month_accrue

    day = datetime.combine(month, datetime.min.time(), UTC) + timedelta(days=14)
    columns = (
        "hour, source_id, model_id, dims_id, reason_id, component, tokens, cost, currency, price_version_id, pool_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM pricing_hourlycost WHERE hour >= %s AND hour < %s AND pool_id IS NULL "
            f"RETURNING {columns}) INSERT INTO pricing_hourlycost ({columns}) "
            f"SELECT {columns.replace('cost,', 'cost * 1.1,')} FROM gone",
            [day, day + timedelta(days=1)],
        )
    began = time.perf_counter()
    result = month_accrue(month=month)
    return {
        "seconds": time.perf_counter() - began,
        "days_computed": result.days_computed,
        "adjusting_entries": JournalEntry.objects.filter(kind="adjustment").count(),
    }


def timed_get(client: Any, url: str, n: int) -> dict[str, Any]:
    times = []
    for _ in range(n):
        began = time.perf_counter()
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        times.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (url, response.status_code, body[:300])
    return {"url": url, "median_ms": statistics.median(times), "max_ms": max(times), "bytes": len(body), "requests": n}


def measure(month: date, args: argparse.Namespace) -> dict[str, Any]:
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from apps.ledger.models import JournalEntry, JournalLine
    from apps.ledger.services.accrual import month_accrue
    from apps.ledger.services.periods import period_close

    results: dict[str, Any] = {}
    wait_quiet(args.quiet_wait)
    began = time.perf_counter()
    closed = period_close(month=month, now=datetime.combine(month, datetime.min.time(), UTC) + timedelta(days=40))
    results["close"] = {
        "seconds": time.perf_counter() - began,
        "days_computed": closed.accrual.days_computed,
        "entries": JournalEntry.objects.count(),
        "lines": JournalLine.objects.count(),
        "findings": len(closed.findings),
        "totals": [{k: str(v) for k, v in vars(t).items()} for t in closed.totals],
    }
    print(f"close: {results['close']['seconds']:.1f} s, {results['close']['lines']:,} lines", flush=True)
    began = time.perf_counter()
    again = month_accrue(month=month)
    results["rerun"] = {"seconds": time.perf_counter() - began, "days_computed": again.days_computed}
    results["adjust"] = reprice_one_day(month)
    print(f"reprice of a closed day: {results['adjust']['seconds']:.1f} s", flush=True)
    user = User.objects.create_user("bench-finance", password="x")
    user.groups.add(Group.objects.get_or_create(name="finance")[0])
    client = Client()
    client.force_login(user)
    label = f"{month:%Y-%m}"
    wait_quiet(args.quiet_wait)
    results["trial_balance"] = timed_get(client, f"/api/v1/ledger/trial-balance?period={label}", args.requests)
    results["matrix"] = timed_get(client, f"/api/v1/ledger/matrix?from={label}&to={label}", args.requests)
    results["focus"] = timed_get(client, f"/api/v1/exports/focus?period={label}", 1)
    for name in ("trial_balance", "matrix", "focus"):
        print(f"{name}: median {results[name]['median_ms']:.0f} ms ({results[name]['bytes']:,} bytes)", flush=True)
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/ledger.py", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--month", default="2026-10", help="the month generated and closed (YYYY-MM)")
    add("--records", type=int, default=RECORDS, help="token records the month stands for")
    add("--dim-sets", type=int, default=612, help="rollup dim sets (bench/reclassify.py's catalogue has 612)")
    add("--business-lines", type=int, default=20)
    add("--models", type=int, default=9)
    add("--pool-models", type=int, default=2, help="models priced by the two cost pools")
    add("--sources", type=int, default=2)
    add("--requests", type=int, default=20, help="requests per API measured")
    add("--seed", type=int, default=1)
    add("--quiet-wait", type=float, default=30.0, help="seconds to wait for an idle machine before timing")
    add("--json", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    db_recreate(url)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    month = date.fromisoformat(f"{args.month}-01")
    began = time.perf_counter()
    combos = catalogue_make(args)
    models = sorted({c[1] for c in combos})
    priced = prices_make(month, models, args.pool_models)
    counts = rows_generate(month, combos, priced, args.records)
    plans_make(month, args)
    print(f"generated {counts} for {len(combos)} combinations in {time.perf_counter() - began:.0f} s", flush=True)
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "cpus": os.cpu_count()}
    results["code"] = checkout_describe()
    results["data"] = {"combinations": len(combos), **counts}
    results |= measure(month, args)
    results["targets"] = {
        "close_seconds": TARGET_CLOSE_SECONDS,
        "api_ms": TARGET_API_MS,
        "met": results["close"]["seconds"] <= TARGET_CLOSE_SECONDS
        and max(results["trial_balance"]["median_ms"], results["matrix"]["median_ms"]) <= TARGET_API_MS,
    }
    out = args.json or REPO / "bench" / "results" / f"ledger-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(results, indent=2, default=str))
    shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    print(f"targets met: {results['targets']['met']}; results in {shown}")
    return 0 if results["targets"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
