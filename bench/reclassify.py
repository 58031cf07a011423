#!/usr/bin/env python
"""Reclassify + reprice benchmark: seconds and records/s of `reclassify_run` (which builds the
class rollup HourlyClass from the stored records, a day per transaction) and `reprice_run`
(which prices HourlyClass into HourlyCost, a day per transaction) over --records records
spread over --days days. Target: both together in at most 120 s for 10,000,000 records.

The records are generated in SQL (INSERT ... SELECT over generate_series, a day per statement,
two connections at a time) into ingest_record's monthly partitions (made by
apps.ingest.partitions), from the catalogue of bench/ingest.py: its features, pipeline steps,
models and dims, whose dim sets and models are made by the ingest service's own functions.
Then a price version for the models (apps.pricing.services.price_set), one cost pool serving
one of them, and VACUUM ANALYZE, so the timed runs read the records as they are read in
production (hint bits set, statistics known), not just after a bulk load.

The database named in DATABASE_URL (default costplatform_bench_reclassify) is DROPPED and
recreated; its name must contain "bench". --reuse keeps it when it already holds the records
of the same --records, --days and --seed (and only empties the rollup and cost tables).
Run with `make bench-reclassify` (BENCH_ARGS="--records 1000000" for a quick run). See
docs/benchmarks.md for the measured results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

from bench.ingest import (  # noqa: E402  (the path above first)
    DIM_NAMES,
    ENV_WEIGHTS,
    ENVS,
    MODELS,
    CpuMeter,
    RecordMaker,
    checkout_describe,
    db_recreate,
    wait_quiet,
)

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/costplatform_bench_reclassify"
TARGET_SECONDS = 120.0
TARGET_RECORDS = 10_000_000
SLOTS = 1 << 16  # the catalogue drawn from by a uniform slot number, each call taking slots by its weight
USER_VARIANTS = 60  # dim sets per call that sends `user` (different users), per env
CONVERSATION_VARIANTS = 4  # and per user, for calls that also send `conversation_id`
RECONCILIATION_SHARE = 0.002  # records that collectors emit for reconciliation gaps
POOL_MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # served by the cost pool, not the price book
# Per million tokens: input, cached input, output (CNY).
PRICES = {
    "meta-llama/Llama-3.1-70B-Instruct": ("4.00", "0.40", "12.00"),
    "Qwen/Qwen2.5-72B-Instruct": ("4.00", "0.40", "12.00"),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": ("1.00", "0.10", "3.00"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": ("2.00", "0.20", "8.00"),
    "Qwen/Qwen2.5-Coder-32B-Instruct": ("2.00", "0.20", "6.00"),
    "BAAI/bge-m3": ("0.50", "0.50", "0.50"),
    POOL_MODEL: ("0.30", "0.03", "0.60"),  # in the version too, but the pool wins
}


# --------------------------------------------------------------------------------------------
# The catalogue: dim sets and models, made by the ingest service
# --------------------------------------------------------------------------------------------


def catalogue(seed: int) -> list[dict[str, Any]]:
    """The calls of bench/ingest.py's catalogue as weighted variants: one per dim set a call
    sends (env, user and conversation variants for the features that send those dims), with
    the call's model, endpoint and weight (Zipf over features, split over pipeline steps)."""
    now = datetime.now(UTC)
    maker = RecordMaker(seed, now - timedelta(days=1), now, 1)
    rng = maker.rng
    zipf = [b - a for a, b in zip([0.0, *maker.feature_cum], maker.feature_cum, strict=False)]
    env_share = [w / sum(ENV_WEIGHTS) for w in ENV_WEIGHTS]
    variants = []
    for steps, feature_weight in zip(maker.features, zipf, strict=True):
        step_total = sum(w for _, w in steps)
        for call, step_weight in steps:
            weight = feature_weight * step_weight / step_total
            base = dict(call.dims[: min(call.dim_count, 5)])
            options: list[tuple[dict[str, str], float]] = [(base, 1.0)]
            if call.dim_count >= 6:
                options = [({**base, "env": env}, share) for env, share in zip(ENVS, env_share, strict=True)]
            if call.dim_count >= 7:
                users = rng.choices(maker.users, cum_weights=maker.user_cum, k=USER_VARIANTS)
                options = [({**dims, "user": user}, w / USER_VARIANTS) for dims, w in options for user in users]
            if call.dim_count >= 8:
                options = [
                    ({**dims, "conversation_id": f"conv_{rng.getrandbits(64):016x}"}, w / CONVERSATION_VARIANTS)
                    for dims, w in options
                    for _ in range(CONVERSATION_VARIANTS)
                ]
            for dims, share in options:
                assert list(dims) == list(DIM_NAMES[: len(dims)])
                variants.append({"dims": dims, "call": call, "weight": weight * share})
    # Reconciliation records of the collectors: everything goes to shadow.unattributed.
    lines = sorted({v["dims"]["business_line"] for v in variants})
    total = sum(v["weight"] for v in variants)
    for line in lines:
        call = next(v["call"] for v in variants if v["dims"]["business_line"] == line)
        dims = {"business_line": line, "costplatform.kind": "reconciliation"}
        variants.append({"dims": dims, "call": call, "weight": total * RECONCILIATION_SHARE / len(lines)})
    return variants


def slots_assign(weights: list[float], slots: int) -> list[int]:
    """How many of `slots` each weight gets, by largest remainder; at least one each."""
    total = sum(weights)
    exact = [w / total * (slots - len(weights)) for w in weights]
    counts = [1 + int(x) for x in exact]
    left = slots - sum(counts)
    for i in sorted(range(len(weights)), key=lambda i: -(exact[i] - int(exact[i])))[:left]:
        counts[i] += 1
    return counts


def catalogue_store(variants: list[dict[str, Any]]) -> dict[str, int]:
    """Make the dim sets and models with the ingest service, and the slot table bench_pick
    that the record statements draw a variant from."""
    from django.db import connection, transaction

    from apps.ingest.services import ENDPOINT_CODES, dimsets_resolve, served_models_resolve

    keys = {tuple(sorted(v["dims"].items())) for v in variants}
    model_keys = {(v["call"].model, version or "") for v in variants for version in v["call"].versions}
    with transaction.atomic():
        dims_ids = dimsets_resolve(keys=keys)
        model_ids = served_models_resolve(keys=model_keys)
    rows = []
    calls: dict[Any, int] = {}
    for v in variants:
        calls.setdefault(v["call"], len(calls))
    counts = slots_assign([v["weight"] for v in variants], SLOTS)
    slot = 0
    for v, count in zip(variants, counts, strict=True):
        call = v["call"]
        versions, speculative, ms_per_token = MODELS[call.model]
        first = model_ids[(call.model, versions[0] or "")]
        second = model_ids[(call.model, versions[1] or "")] if len(versions) > 1 else first
        endpoint = ENDPOINT_CODES[call.endpoint] if call.endpoint_known else None
        dims_id = dims_ids[tuple(sorted(v["dims"].items()))][0]
        for _ in range(count):
            rows.append((slot, dims_id, first, second, endpoint, call.endpoint == "embeddings", speculative,
                         ms_per_token, calls[call], call.endpoint))  # fmt: skip
            slot += 1
    assert slot == SLOTS
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_pick")
        cursor.execute(
            "CREATE TABLE bench_pick (slot int PRIMARY KEY, dims_id int, model_1 int, model_2 int, "
            "endpoint smallint, embed bool, speculative bool, ms_per_token float8, call int, prefix text)"
        )
        prefixes = {"chat.completions": "chatcmpl-", "responses": "resp_", "embeddings": "embd-"}
        cursor.execute(
            "INSERT INTO bench_pick SELECT * FROM unnest(%s::int[], %s::int[], %s::int[], %s::int[], %s::smallint[], "
            "%s::bool[], %s::bool[], %s::float8[], %s::int[], %s::text[])",
            [list(c) for c in zip(*[(*r[:9], prefixes[r[9]]) for r in rows], strict=True)],
        )
        cursor.execute("ANALYZE bench_pick")
    return {"variants": len(variants), "dim_sets": len(dims_ids), "models": len(model_ids)}


# --------------------------------------------------------------------------------------------
# The records, in SQL
# --------------------------------------------------------------------------------------------

# One day of records: n rows in ts order (a few seconds of jitter, as they arrive), each of a variant drawn
# from bench_pick; tokens, statuses, finish reasons, timings as in bench/ingest.py. Prompt
# hashes on 85% of the non-embedding records: 5% of those resend a prompt of the same call
# (same model and business line) in the same 2-minute bucket, so within 300 s; the rest are
# one of 2,000 prompts of their call (feature and step), a few of them very frequent. Normal
# deviates are sums of four uniforms (mean 0, variance 1).
_N = "((random() + random() + random() + random() - 2) * 1.7320508)"
RECORDS_SQL = f"""
INSERT INTO ingest_record (ts, record_key, source_id, model_id, dims_id, prompt, prompt_cached, completion, system,
    tool, structural, padding, draft, draft_accepted, recomputed, queued, ttft, prefill, decode, e2e, endpoint, status,
    finish_reason, quality_tier, attempt, record_id, retry_of, prompt_hash)
SELECT ts, ('x' || substr(md5(record_id), 1, 16))::bit(64)::bigint, %(source)s, model_id, dims_id, prompt,
       prompt_cached, completion, system, tool, structural, padding, draft,
       (draft * (0.4 + 0.4 * random()))::int, recomputed, queued,
       CASE WHEN timed AND status <> 4 THEN queued + prefill END,
       CASE WHEN timed AND status <> 4 THEN prefill END,
       CASE WHEN timed AND status <> 4 THEN decode END,
       CASE WHEN NOT timed THEN NULL WHEN status = 4 THEN queued ELSE queued + prefill + decode END,
       endpoint, status, finish_reason, quality_tier, attempt, record_id, retry_of, prompt_hash
FROM (
    SELECT t.*, CASE WHEN timed THEN greatest(0, exp(2.5 + 1.3 * {_N}))::int END AS queued,
           greatest(1, (prompt - prompt_cached) / 9) AS prefill,
           (completion * ms_per_token * (0.8 + 0.4 * random()))::int AS decode,
           CASE WHEN speculative AND completion > 0 THEN (completion * (1.5 + 1.5 * random()))::int ELSE 0 END AS draft,
           CASE WHEN completion > 0 AND random() < 0.25 THEN (completion * (0.02 + 0.18 * random()))::int
                ELSE 0 END AS structural,
           CASE WHEN NOT embed AND random() < 0.3 THEN ((prompt - system) * (0.1 + 0.6 * random()))::int
                ELSE 0 END AS tool
    FROM (
        SELECT s.*,
               CASE WHEN status <> 4 AND random() < 0.6 THEN (prompt * (0.2 + 0.75 * random()))::int / 16 * 16
                    ELSE 0 END AS prompt_cached,
               CASE WHEN NOT embed AND random() < 0.9 THEN least(prompt / 2, 40 + (random() * 860)::int)
                    ELSE 0 END AS system,
               CASE WHEN embed OR status = 4 THEN 0
                    WHEN status = 0 AND finish_reason = 2 THEN 1024
                    WHEN status = 0 THEN least(8192, greatest(1, exp(5.5 + 0.9 * {_N})::int))
                    WHEN random() < 0.7 THEN least(8192, exp(4.0 + 1.2 * {_N})::int)
                    ELSE 0 END AS completion,
               CASE WHEN random() < 0.05 THEN 1 + (random() * 62)::int ELSE 0 END AS padding,
               CASE WHEN status = 0 AND random() < 0.01 THEN 1 + (random() * (prompt - 1))::int ELSE 0 END
                   AS recomputed,
               random() < 0.92 AS timed,
               CASE WHEN random() < 0.3 THEN 1 + (random() * 2.999)::int END::smallint AS quality_tier,
               CASE WHEN retry THEN 2 + (random() * 1.5)::int ELSE 1 END::smallint AS attempt,
               prefix || md5(%(seed)s::text || ':' || %(day)s::text || ':' || g) AS record_id,
               CASE WHEN retry THEN prefix || md5(%(seed)s::text || ':r:' || %(day)s::text || ':' || g) END AS retry_of,
               CASE WHEN embed OR random() >= 0.85 THEN NULL
                    WHEN random() < 0.05 THEN decode(md5('again:' || dims_id || ':' || model_1 || ':'
                         || floor(extract(epoch FROM ts) / 120) || ':' || (random() * 2)::int), 'hex')
                    ELSE decode(md5('prompt:' || call || ':' || floor(2000 * random() ^ 3)), 'hex') END AS prompt_hash
        FROM (
            SELECT r.*,
                   CASE WHEN r.u < 0.940 THEN 0 WHEN r.u < 0.965 THEN 1 WHEN r.u < 0.980 THEN 2 WHEN r.u < 0.995 THEN 3
                        ELSE 4 END::smallint AS status,
                   CASE WHEN p.embed OR r.u >= 0.995 THEN NULL
                        WHEN r.u < 0.940 THEN CASE WHEN r.f < 0.78 THEN 1 WHEN r.f < 0.85 THEN 2 WHEN r.f < 0.99 THEN 3
                                                   ELSE 6 END
                        WHEN r.u < 0.965 THEN 5 WHEN r.u < 0.980 THEN CASE WHEN r.f < 0.5 THEN 4 END
                        ELSE 4 END::smallint AS finish_reason,
                   CASE WHEN random() < 0.35 THEN p.model_2 ELSE p.model_1 END AS model_id,
                   p.dims_id, p.model_1, p.endpoint, p.embed, p.speculative, p.ms_per_token, p.call, p.prefix,
                   least(128000, greatest(4, exp(7.0 + {_N})::int)) AS prompt
            FROM (
                SELECT g, %(start)s::timestamptz
                          + least(86399.999999, greatest(0, (g + 0.5) * %(step)s + random() * 8 - 4))
                          * interval '1 second' AS ts,
                       (random() * {SLOTS})::int %% {SLOTS} AS slot, random() AS u, random() AS f,
                       random() < 0.024 AS retry
                FROM generate_series(0, %(n)s - 1) AS g
            ) r JOIN bench_pick p USING (slot)
        ) s
    ) t
) x
"""


def records_generate(conninfo: dict[str, Any], source_id: int, seed: int, days: list[date], total: int) -> int:
    """INSERT each day's records (total / days each, the remainder on the first days), two
    connections at a time, each day committed on its own; deterministic for a seed and days."""
    import psycopg

    per_day = [total // len(days) + (1 if i < total % len(days) else 0) for i, _ in enumerate(days)]
    jobs = list(zip(days, per_day, strict=True))
    lock = threading.Lock()
    inserted = [0]
    errors: list[BaseException] = []

    def work() -> None:
        with psycopg.connect(**conninfo, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = off")
            while not errors:
                with lock:
                    if not jobs:
                        return
                    day, n = jobs.pop(0)
                start = datetime.combine(day, datetime.min.time(), UTC)
                params = {"source": source_id, "seed": str(seed), "day": day.isoformat(), "n": n,
                          "start": start, "step": 86_400 / n}  # fmt: skip
                try:
                    # random() seeded per day: the same records whichever connection makes the day.
                    conn.execute("SELECT setseed(%s)", [(seed * 1_000_003 + day.toordinal()) % 1_999_999 / 1e6 - 1])
                    done = conn.execute(RECORDS_SQL, params).rowcount
                except BaseException as exc:
                    errors.append(exc)
                    return
                with lock:
                    inserted[0] += done

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return inserted[0]


# --------------------------------------------------------------------------------------------
# Setup
# --------------------------------------------------------------------------------------------


def days_of(args: argparse.Namespace) -> list[date]:
    """--days whole UTC days ending yesterday: every hour has ended, so pools are allocated."""
    end = (datetime.now(UTC) - timedelta(hours=1)).date()
    return [end - timedelta(days=args.days - i) for i in range(args.days)]


def prices_and_pool(start: datetime) -> dict[str, Any]:
    from apps.pricing.services import cost_pool_create, price_set

    version = None
    for model, (input_, cached, output) in PRICES.items():
        prices = {"input": Decimal(input_), "cached_input": Decimal(cached), "output": Decimal(output)}
        version = price_set(model_pattern=model, prices=prices, effective_from=start, currency="CNY")
    pool = cost_pool_create(
        name="bench-8x-h100",
        currency="CNY",
        gpus=8,
        cost_per_gpu_hour=Decimal("18.50"),
        model_patterns=[POOL_MODEL],
        capacity=400_000_000,
        effective_from=start,
    )
    assert version is not None
    return {"price_version": version.pk, "pool": pool.pk}


META = "bench_reclassify_meta"


def data_prepare(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """The database with the records (generated, or kept with --reuse), migrated, with the
    price version and pool; the rollup and cost tables empty. Returns what was made."""
    import psycopg

    from costplatform.env import database_from_url

    days = days_of(args)
    wanted = {"records": args.records, "days": [d.isoformat() for d in days], "seed": args.seed}
    info: dict[str, Any] | None = None
    if args.reuse:
        db = database_from_url(url)
        params = {"host": db["HOST"], "port": db["PORT"] or None, "user": db["USER"] or None}
        params = {k: v for k, v in params.items() if v}
        try:
            with psycopg.connect(dbname=str(db["NAME"]), **params) as conn:
                row = conn.execute(f"SELECT info FROM {META}").fetchone()  # type: ignore[arg-type]
                info = row[0] if row else None
        except psycopg.Error:
            info = None
        if info is not None and all(info.get(k) == v for k, v in wanted.items()):
            print(f"--reuse: {db['NAME']} holds the records already", flush=True)
            django_setup(migrate=True)
            rollups_empty()
            return info
        print("--reuse: no matching records; generating them", flush=True)

    conninfo = db_recreate(url)
    django_setup(migrate=True)
    from django.db import connection

    from apps.accounts.services import collector_key_create
    from apps.ingest.partitions import partitions_ensure

    t0 = time.perf_counter()
    collector = collector_key_create(name="bench-collector")
    variants = catalogue(args.seed)
    made = catalogue_store(variants)
    partitions_ensure(days)
    start = datetime.combine(days[0], datetime.min.time(), UTC)
    priced = prices_and_pool(start)
    print(f"catalogue: {made['variants']:,} (call, dim set) variants, {made['dim_sets']:,} dim sets, {made['models']} "
          f"models; price version {priced['price_version']}, pool {priced['pool']} ({POOL_MODEL})",
          flush=True)  # fmt: skip
    connection.close()
    t1 = time.perf_counter()
    inserted = records_generate(conninfo, collector.key.pk, args.seed, days, args.records)
    t2 = time.perf_counter()
    with psycopg.connect(**conninfo, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) ingest_record")
        conn.execute("VACUUM (ANALYZE) ingest_dimset")
        conn.execute("CHECKPOINT")
    t3 = time.perf_counter()
    if inserted != args.records:
        sys.exit(f"generated {inserted:,} records, expected {args.records:,}")
    print(f"generated {inserted:,} records over {len(days)} days in {t2 - t1:.1f} s "
          f"({inserted / (t2 - t1):,.0f}/s), VACUUM ANALYZE {t3 - t2:.1f} s", flush=True)  # fmt: skip
    info = {**wanted, **made, **priced, "source_id": collector.key.pk, "generate_seconds": t2 - t1,
            "setup_seconds": t1 - t0, "vacuum_seconds": t3 - t2}  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {META} (info jsonb)")
        cursor.execute(f"INSERT INTO {META} VALUES (%s)", [json.dumps(info)])
    return info


def django_setup(*, migrate: bool) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    if migrate:
        call_command("migrate", verbosity=0)


def rollups_empty() -> None:
    """What reclassify and reprice write, emptied (a --reuse run starts where a fresh one does)."""
    from django.db import connection

    from apps.classification.services import RUN_KIND as RECLASSIFY_KIND
    from apps.common.models import JobRun
    from apps.pricing.services import RUN_KIND as REPRICE_KIND

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE classification_hourlyclass, classification_dirtyday, "
            "pricing_hourlycost, pricing_poolidlehour, pricing_unpricedhour, pricing_dirtyhour"
        )
        # Their runs only: the table holds the runs of every job.
        cursor.execute(f"DELETE FROM {JobRun._meta.db_table} WHERE kind IN (%s, %s)", [RECLASSIFY_KIND, REPRICE_KIND])
        cursor.execute("VACUUM ANALYZE classification_hourlyclass")


def data_profile() -> dict[str, Any]:
    """What the records are like: counts per status, prompt hashes, records per day."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 0), count(prompt_hash), count(DISTINCT dims_id), "
            "count(*) FILTER (WHERE attempt > 1), count(DISTINCT model_id), "
            "coalesce(sum(prompt + completion + padding + recomputed + draft - draft_accepted), 0) FROM ingest_record"
        )
        total, ok, hashed, dims, retries, models, tokens = cursor.fetchone()
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
            "WHERE inhparent = 'ingest_record'::regclass"
        )
        size = cursor.fetchone()[0]
    return {"records": total, "ok": ok, "hashed": hashed, "dim_sets_used": dims, "retries": retries,
            "models_used": models, "tokens": int(tokens), "bytes": int(size)}  # fmt: skip


def outcome() -> dict[str, Any]:
    """What the runs wrote: rollup and cost rows, and the share of tokens per class.reason."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), coalesce(sum(tokens), 0) FROM classification_hourlyclass")
        class_rows, class_tokens = cursor.fetchone()
        cursor.execute("SELECT count(*), count(pool_id), coalesce(sum(cost), 0) FROM pricing_hourlycost")
        cost_rows, pool_rows, cost = cursor.fetchone()
        cursor.execute("SELECT count(*), coalesce(sum(idle), 0) FROM pricing_poolidlehour")
        idle_rows, idle = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM pricing_unpricedhour")
        unpriced = cursor.fetchone()[0]
        cursor.execute(
            "SELECT r.name, sum(c.tokens) FROM classification_hourlyclass c JOIN classification_reason r "
            "ON r.id = c.reason_id GROUP BY 1 ORDER BY 2 DESC"
        )
        reasons = {name: int(tokens) for name, tokens in cursor.fetchall()}
    return {"hourlyclass_rows": class_rows, "hourlyclass_tokens": int(class_tokens), "hourlycost_rows": cost_rows,
            "pool_cost_rows": pool_rows, "cost": str(cost), "pool_idle_hours": idle_rows, "idle": str(idle),
            "unpriced_rows": unpriced, "reasons": reasons}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/reclassify.py",
        description=(
            "Reclassify + reprice benchmark. Generates --records realistic token records over --days days in SQL, "
            "a price version and a cost pool, then times reclassify_run (HourlyClass from the records) and "
            "reprice_run (HourlyCost from HourlyClass) over the whole range. Target: 10,000,000 records in at "
            "most 120 s together. DROPS and recreates the database named in DATABASE_URL (default "
            "costplatform_bench_reclassify; the name must contain 'bench')."
        ),
    )
    add = parser.add_argument
    add("--records", type=int, default=TARGET_RECORDS, help="records generated (10000000)")
    add("--days", type=int, default=30, help="days they are spread over, ending yesterday (30)")
    add("--seed", type=int, default=1, help="random seed of the catalogue and the records (1)")
    add("--rounds", type=int, default=1,
        help="run reclassify + reprice this many times; from the second on they replace the rows (1)")  # fmt: skip
    add("--reuse", action="store_true",
        help="keep the database when it holds the records of the same --records, --days and --seed")  # fmt: skip
    add("--quiet-wait", type=float, default=120.0,
        help="before each timed phase, wait up to this many seconds for the machine to be idle (120)")  # fmt: skip
    add("--json", type=Path, default=None, help="write the results here (bench/results/reclassify-<UTC>.json)")
    add("--check", action="store_true", help="exit with status 1 when the target is missed")
    args = parser.parse_args(argv)
    if args.records < 1 or args.days < 1 or args.rounds < 1:
        parser.error("--records, --days and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "costplatform.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    print(f"reclassify + reprice benchmark: {args.records:,} records over {args.days} days, "
          f"{os.cpu_count()} CPUs", flush=True)  # fmt: skip
    info = data_prepare(args, url)
    from django.db import connection

    from apps.classification.services import reclassify_run
    from apps.pricing.services import reprice_run

    dbname = connection.settings_dict["NAME"]
    profile = data_profile()
    print(f"records: {profile['records']:,} ({profile['ok'] / profile['records']:.1%} ok, "
          f"{profile['hashed'] / profile['records']:.1%} with a prompt hash, {profile['retries']:,} retries), "
          f"{profile['dim_sets_used']:,} dim sets, {profile['models_used']} model versions, "
          f"{profile['bytes'] / profile['records']:.0f} bytes a record stored", flush=True)  # fmt: skip
    days = [date.fromisoformat(d) for d in info["days"]]
    start, end = days[0], days[-1] + timedelta(days=1)
    from apps.classification.services import RECLASSIFY_WORKERS
    from apps.pricing.services import REPRICE_WORKERS

    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "cpus": os.cpu_count(),
                               "code": checkout_describe(), "data": info, "profile": profile, "rounds": [],
                               "reprice_workers": REPRICE_WORKERS,
                               "reclassify_workers": RECLASSIFY_WORKERS}  # fmt: skip
    for round_ in range(args.rounds):
        steps: dict[str, Any] = {}
        for name in ("reclassify", "reprice"):
            wait_quiet(args.quiet_wait)
            print(f"round {round_ + 1}: {name}_run {start} .. {end} ({len(days)} days) ...", flush=True)
            per_day: list[float] = []
            last = [time.perf_counter()]

            def progress(day: date, done: int, total: int, per_day: list[float] = per_day, last: list = last) -> None:
                now = time.perf_counter()
                per_day.append(now - last[0])
                last[0] = now

            with CpuMeter(server_pid=None, dbname=dbname) as meter:
                last[0] = time.perf_counter()
                if name == "reclassify":
                    reclassify_run(start=start, end=end, progress=progress)
                else:
                    reprice_run(start=start, end=end, progress=progress)
            steps[name] = {"seconds": meter.wall, "cpu": meter.summary(profile["records"]), "per_day": per_day}
            print(f"  {meter.wall:.1f} s, {profile['records'] / meter.wall:,.0f} records/s; a day: "
                  f"{min(per_day):.2f} .. {max(per_day):.2f} s", flush=True)  # fmt: skip
        steps["outcome"] = outcome()
        results["rounds"].append(steps)
    return report(args, results)


def report(args: argparse.Namespace, results: dict[str, Any]) -> int:
    records = results["profile"]["records"]
    days = len(results["data"]["days"])
    target = TARGET_SECONDS * records / TARGET_RECORDS  # the same rate, for other sizes
    checks = []
    for i, steps in enumerate(results["rounds"], start=1):
        both = steps["reclassify"]["seconds"] + steps["reprice"]["seconds"]
        print(f"\nround {i} ({'from empty rollups' if i == 1 else 'replacing the rows of the round before'}):")
        header = (
            f"| {'step':<24} | {'records':>10} | {'days':>4} | {'seconds':>7} | {'records/s':>9} | {'of 120 s':>8} |"
        )
        print(header)
        print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
        for name, seconds in (
            ("reclassify_run", steps["reclassify"]["seconds"]),
            ("reprice_run", steps["reprice"]["seconds"]),
            ("together", both),
        ):
            print(f"| {name:<24} | {records:>10,} | {days:>4} | {seconds:>7.1f} | {records / seconds:>9,.0f} | "
                  f"{seconds / target:>7.0%} |")  # fmt: skip
        print("\nCPU, core-seconds (this process: Django and the pricing's Python; backends: PostgreSQL serving the "
              "bench database; other: the rest of the machine; 'CPU floor': (this process + backends) / the streams "
              "that can run at once (RECLASSIFY_WORKERS and REPRICE_WORKERS days at a time, at most the cores), "
              "the least it could take with the cores to itself):")  # fmt: skip
        header = (f"| {'step':<14} | {'this process':>12} | {'backends':>8} | {'other':>6} | {'machine busy':>13} | "
                  f"{'CPU floor':>9} |")  # fmt: skip
        print(header)
        print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
        alone = 0.0
        for name in ("reclassify", "reprice"):
            cpu = steps[name]["cpu"]
            busy = cpu["machine"] / (cpu["wall"] * cpu["cpus"])
            workers = results.get(f"{name}_workers", 1)
            streams = max(1, min(workers, cpu["cpus"]))
            steps[name]["alone_seconds"] = seconds = (cpu["client"] + cpu["backends"]) / streams
            alone += seconds
            print(f"| {name + '_run':<14} | {cpu['client']:>12.1f} | {cpu['backends']:>8.1f} | {cpu['other']:>6.1f} | "
                  f"{cpu['machine']:>6.1f} ({busy:>4.0%}) | {seconds:>7.1f} s |")  # fmt: skip
        steps["alone_seconds"] = alone
        print(f"together, CPU floor: {alone:.1f} s ({records / alone:,.0f} records/s)")
        for name in ("reclassify", "reprice"):
            cpu = steps[name]["cpu"]
            if cpu["other"] > 0.1 * cpu["machine"]:
                top = ", ".join(f"{n} {s:.1f} s" for n, s in cpu["top_others"][:4])
                print(f"  ({name}) 'other' was {cpu['other']:.1f} core-s of {cpu['machine']:.1f}; most: {top}")
        out = steps["outcome"]
        total = max(out["hourlyclass_tokens"], 1)
        top = ", ".join(f"{name} {tokens / total:.1%}" for name, tokens in list(out["reasons"].items())[:8])
        print(f"wrote {out['hourlyclass_rows']:,} HourlyClass rows, {out['hourlycost_rows']:,} HourlyCost rows "
              f"({out['pool_cost_rows']:,} of the pool), {out['pool_idle_hours']:,} pool-hours, "
              f"{out['unpriced_rows']} unpriced rows; cost {Decimal(out['cost']):,.2f} CNY + idle "
              f"{Decimal(out['idle']):,.2f}")  # fmt: skip
        print(f"tokens by class.reason: {top}")
        if out["hourlyclass_tokens"] != results["profile"]["tokens"]:
            sys.exit(
                f"HourlyClass holds {out['hourlyclass_tokens']:,} tokens; the records {results['profile']['tokens']:,}"
            )
        checks.append((i, both, both <= target))
    print(f"\ntarget: {records:,} records in <= {target:.0f} s (120 s for 10,000,000):")
    for (i, both, ok), steps in zip(checks, results["rounds"], strict=True):
        print(f"  round {i}: {both:.1f} s, {both / target:.2f}x the target  {'pass' if ok else 'FAIL'} "
              f"(CPU floor {steps['alone_seconds']:.1f} s, {steps['alone_seconds'] / target:.2f}x)")  # fmt: skip
    results["checks"] = [{"round": i, "seconds": s, "target": target, "pass": ok} for i, s, ok in checks]

    path = args.json or REPO / "bench" / "results" / f"reclassify-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nresults written to {path}")
    return 1 if args.check and not all(ok for _, _, ok in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
