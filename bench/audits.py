#!/usr/bin/env python
"""Audit benchmark: seconds of each finder and of the whole `audit_run` over a month of
--records records (generated in SQL into the month's partition, a day per statement), with
--conversations agent conversations and --features rollup dim sets; 10 % of prompts repeat one
of 1,000 hashes, 3 % of requests fail and 2 % are retries. The hourly rollup is built from the
records in one statement, then VACUUM ANALYZE, so the timed finders read the month as in
production. The database named in DATABASE_URL (default costplatform_bench_audits) is DROPPED
and recreated; its name must contain "bench".

    .venv/bin/python bench/audits.py --records 2000000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

MONTH = date(2026, 11, 1)
START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 30
MODELS = ("qwen2.5-7b-instruct", "qwen2.5-72b-instruct", "qwen2.5-14b-instruct")

_DAY_SQL = """
INSERT INTO ingest_record (ts, record_key, source_id, model_id, dims_id, prompt, prompt_cached, completion, system,
    tool, structural, padding, draft, draft_accepted, recomputed, endpoint, status, finish_reason, attempt, record_id,
    prompt_hash)
SELECT %(day)s::timestamptz + random() * interval '1 day', %(base)s::bigint + g, %(source)s,
       (%(models)s::int[])[1 + g %% 3], (%(dims)s::int[])[1 + floor(random() * %(ndims)s)::int],
       p, (random() * p / 2)::int, 50 + (random() * 400)::int, p / 5, p / 5, 0, 0, 0, 0, 0, 1,
       CASE WHEN random() < 0.03 THEN 1 ELSE 0 END, 1, CASE WHEN random() < 0.02 THEN 2 ELSE 1 END,
       'bench-' || %(base)s::bigint + g,
       decode(md5(CASE WHEN random() < 0.1 THEN (g %% 1000)::text ELSE %(base)s::text || g END), 'hex')
FROM generate_series(1, %(count)s) g, LATERAL (SELECT 300 + (random() * 2000)::int AS p) sizes
"""
_ROLLUP_SQL = """
INSERT INTO ingest_hourlyusage (hour, source_id, model_id, dims_id, endpoint, status, records, prompt, prompt_cached,
    completion, system, tool, structural, padding, draft, draft_accepted, recomputed)
SELECT date_trunc('hour', r.ts, 'UTC'), r.source_id, r.model_id, coalesce(d.rollup_id, d.id), r.endpoint, r.status,
       count(*), sum(prompt), sum(prompt_cached), sum(completion), sum(system), sum(tool), 0, 0, 0, 0, 0
FROM ingest_record r JOIN ingest_dimset d ON d.id = r.dims_id
GROUP BY 1, 2, 3, 4, 5, 6
"""


def database() -> None:
    url = os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform_bench_audits")
    from bench.ingest import db_recreate

    db_recreate(url)


def generate(records: int, conversations: int, features: int) -> None:
    from django.db import connection

    from apps.accounts.services import collector_key_create
    from apps.ingest.partitions import partitions_ensure
    from apps.ingest.services import dimsets_resolve, served_models_resolve
    from apps.pricing.services import price_version_create

    source = collector_key_create(name="bench").key.pk
    models = served_models_resolve(keys=[(m, "") for m in MODELS])
    rollups = [(("business_line", f"bl-{i % 20}"), ("feature", f"feature-{i}")) for i in range(features)]
    convs = [(*rollups[i % features], ("conversation_id", f"conv-{i}")) for i in range(conversations)]
    dims = dimsets_resolve(keys=[*rollups, *convs])
    dims_ids = [pk for pk, _ in dims.values()]
    partitions_ensure({MONTH})
    per_day = records // DAYS
    with connection.cursor() as cursor:
        for day in range(DAYS):
            cursor.execute(
                _DAY_SQL,
                {
                    "day": START + timedelta(days=day),
                    "base": day * 100_000_000,
                    "source": source,
                    "models": [models[(m, "")] for m in MODELS],
                    "dims": dims_ids,
                    "ndims": len(dims_ids),
                    "count": per_day,
                },
            )
        cursor.execute(_ROLLUP_SQL)
    from decimal import Decimal

    price_version_create(
        effective_from=datetime(2026, 10, 1, tzinfo=UTC),
        currency="CNY",
        name="bench",
        prices={m: {"input": Decimal(2), "cached_input": Decimal("0.5"), "output": Decimal(6)} for m in MODELS},
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE ingest_record")
        cursor.execute("VACUUM ANALYZE ingest_hourlyusage")
        cursor.execute("VACUUM ANALYZE ingest_dimset")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--conversations", type=int, default=50_000)
    parser.add_argument("--features", type=int, default=200)
    args = parser.parse_args()
    database()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    began = time.monotonic()
    generate(args.records, args.conversations, args.features)
    print(f"generated {args.records:,} records in {time.monotonic() - began:.1f} s")

    from apps.audits.finders import FINDERS, AuditWindow
    from apps.audits.models import KIND_LABELS, ModelDowngrade
    from apps.audits.selectors import month_bounds, month_rates
    from apps.audits.services import audit_run

    ModelDowngrade.objects.create(large_model=MODELS[1], small_model=MODELS[0], max_prompt_tokens=800)
    start, end = month_bounds(MONTH)
    window = AuditWindow(month="2026-11", start=start, end=end, rates=month_rates(start=start, end=end))
    for kind in KIND_LABELS:
        began = time.monotonic()
        found = FINDERS[kind](window)
        print(f"{kind:15s} {time.monotonic() - began:7.2f} s  {len(found)} findings")
    began = time.monotonic()
    report = audit_run(month=MONTH)
    print(f"audit_run       {time.monotonic() - began:7.2f} s  {report.findings.count()} findings")


if __name__ == "__main__":
    main()
