#!/usr/bin/env python
"""WAL and time a record costs the primary, stage by stage (docs/scaling.md, the capacity plan):
ingest (apps.pipeline's `batch_ingest`, the ingest API's: stored and classified in one statement,
on bench/ingest.py's generated bodies of 5,000 records), pricing the hours its class rollup marked
(`dirty_hours_price`, beat's job) and accruing the days
(`recent_accrue`). For each stage: seconds, records/s of this one process and its backend, WAL
bytes (pg_current_wal_lsn before and after) and WAL bytes a record.

The database named in DATABASE_URL (default costplatform_bench_wal) is DROPPED and recreated; its
name must contain "bench". On a shared machine the seconds vary with what else runs; the WAL bytes
do not.

    make bench-wal BENCH_ARGS="--records 100000"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/costplatform_bench_wal")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    from bench.ingest import db_recreate, generate_bodies

    db_recreate(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    bodies, counts, _ = generate_bodies(args.records, 5_000, args.seed, datetime.now(UTC))
    results = stages(bodies, sum(counts))
    print(json.dumps({"records": sum(counts), "stages": results}, indent=2))


def _lsn() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        return int(cursor.fetchone()[0])


def _timed(name: str, records: int, work: Any) -> dict[str, Any]:
    before, started = _lsn(), time.perf_counter()
    work()
    seconds, wal = time.perf_counter() - started, _lsn() - before
    return {
        "stage": name,
        "seconds": round(seconds, 2),
        "records_per_s": round(records / seconds),
        "wal_bytes": wal,
        "wal_bytes_a_record": round(wal / records, 1),
    }


def stages(bodies: list[bytes], records: int) -> list[dict[str, Any]]:
    from apps.accounts.services import collector_key_create
    from apps.ledger.tasks import recent_accrue
    from apps.pipeline.records import batch_ingest
    from apps.pricing.services import price_set
    from apps.pricing.tasks import dirty_hours_price
    from bench.reclassify import PRICES

    key = collector_key_create(name="bench-wal", backfill=True).key
    for model, (input_, cached, output) in PRICES.items():
        prices = {"input": Decimal(input_), "cached_input": Decimal(cached), "output": Decimal(output)}
        price_set(model_pattern=model, prices=prices, effective_from=datetime(2000, 1, 1, tzinfo=UTC), currency="CNY")

    def ingest() -> None:
        for body in bodies:
            batch_ingest(key=key, body=body, ndjson=False)

    return [
        _timed("ingest (batch_ingest, bodies of 5,000)", records, ingest),
        _timed("pricing (dirty_hours_price)", records, dirty_hours_price),
        _timed("accrual (recent_accrue)", records, recent_accrue),
    ]


if __name__ == "__main__":
    main()
