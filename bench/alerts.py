#!/usr/bin/env python
"""Alerts benchmark: 1,000 business lines x 20 models, then

  cycle     every default rule evaluated once, one after the other in this process (the
            beat fans them out to workers, so a cycle there takes as long as the slowest
            rule; the sum here is the conservative figure); target <= 10 s per cycle.
            The first cycle writes the states of whatever fires; later cycles are steady.
  latency   records of an anomalous business line POSTed to the real ingest API (Django
            test client, whole DRF stack) while a real Celery worker and a real beat
            (DatabaseScheduler, evaluation every COSTPLATFORM_ALERTS_EVALUATE_EVERY s) run;
            the time until a loopback webhook receiver has the signed message; target <= 60 s.

The rollups are written in SQL (INSERT ... SELECT over generate_series), healthy and flat:
per combination-hour 4,000 prompt (70 % cached) + 1,000 completion tokens over the 8 days
the unattributed detector reads and the same hour of the 4 weeks before (spike), classified
85 % effective / 10 % waste / 5 % shadow over the last 24 h, priced per day for the trend
and the month's budgets (1 % of business lines at 85 % of budget, so those fire).

The database named in DATABASE_URL (default costplatform_bench_alerts) is DROPPED and
recreated; its name must contain "bench". Needs CELERY_BROKER_URL (Redis) for the latency
part. Results: bench/results/alerts-<UTC time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

from bench.ingest import checkout_describe, db_recreate  # noqa: E402  (the path above first)

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/costplatform_bench_alerts"
TARGET_CYCLE_S = 10.0
TARGET_LATENCY_S = 60.0


def setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def sql(statement: str, params: list[Any] | None = None) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


def generate(lines: int, models: int, now: datetime) -> dict[str, Any]:
    """Reference rows through the services, rollups in SQL. Returns what the latency part needs."""
    from apps.accounts.services import collector_key_create
    from apps.classification.services import active_ruleset, builtins_ensure, reason_ensure
    from apps.pricing.services import price_version_create

    started = time.monotonic()
    key = collector_key_create(name="bench-vllm")
    builtins_ensure()
    reasons = {name: reason_ensure(name=name).id for name in ("effective.input", "waste.failed", "shadow.unattributed")}
    ruleset = active_ruleset().id
    version = price_version_create(effective_from=datetime(2020, 1, 1, tzinfo=UTC), currency="CNY", name="", prices={})
    sql(
        "INSERT INTO ingest_servedmodel (name, version) SELECT 'model-' || m, '' FROM generate_series(1, %s) m",
        [models],
    )
    sql(
        "INSERT INTO ingest_dimset (digest, dims, business_line) SELECT decode(md5('bl-' || b), 'hex'), "
        "jsonb_build_object('business_line', 'bl-' || b), 'bl-' || b FROM generate_series(1, %s) b "
        "UNION ALL SELECT decode(md5('none'), 'hex'), '{}'::jsonb, ''",
        [lines],
    )
    sql("UPDATE ingest_dimset SET rollup_id = id")
    hour = now.replace(minute=0, second=0, microsecond=0)
    hours = [hour - timedelta(hours=h) for h in range(0, 8 * 24 + 1)]
    hours = sorted({*hours, *(hour - timedelta(weeks=w) for w in range(1, 5))})
    # Unattributed tokens: one dim set, 3 % of the traffic (under the 5 % threshold).
    usage = (
        "INSERT INTO ingest_hourlyusage (hour, source_id, model_id, dims_id, endpoint, status, records, prompt, "
        "prompt_cached, completion, system, tool, structural, padding, draft, draft_accepted, recomputed) "
        "SELECT h, %s, m.id, d.id, 1, 0, 5, {scale} * 4000, {scale} * 2800, {scale} * 1000, 0, 0, 0, 0, 0, 0, 0 "
        "FROM unnest(%s::timestamptz[]) h CROSS JOIN ingest_servedmodel m CROSS JOIN ingest_dimset d "
        "WHERE {where}"
    )
    sql(usage.format(scale=1, where="d.business_line <> ''"), [key.key.id, hours])
    sql(usage.format(scale=lines * 3 // 100, where="d.business_line = '' AND m.name = 'model-1'"), [key.key.id, hours])
    # The hour under way holds what it has had so far: the spike detector expects the baseline
    # times the hour's elapsed fraction, so a whole hour's tokens in its first half would be a
    # spike of every line, and the latency trial's line would already be firing.
    elapsed = (now - hour) / timedelta(hours=1)
    sql(
        "UPDATE ingest_hourlyusage SET records = ceil(records * %s), prompt = round(prompt * %s), "
        "prompt_cached = round(prompt_cached * %s), completion = round(completion * %s) WHERE hour = %s",
        [elapsed, elapsed, elapsed, elapsed, hour],
    )
    day_hours = [hour - timedelta(hours=h) for h in range(24)]
    for reason, share in (("effective.input", 85), ("waste.failed", 10), ("shadow.unattributed", 5)):
        sql(
            "INSERT INTO classification_hourlyclass (hour, source_id, model_id, dims_id, ruleset_id, reason_id, "
            "component, tokens) SELECT h, %s, m.id, d.id, %s, %s, 0, 5000 * %s / 100 FROM unnest(%s::timestamptz[]) h "
            "CROSS JOIN ingest_servedmodel m CROSS JOIN ingest_dimset d WHERE d.business_line <> ''",
            [key.key.id, ruleset, reasons[reason], share, day_hours],
        )
    days = [hour.replace(hour=3) - timedelta(days=d) for d in range(1, 5)]
    sql(
        "INSERT INTO pricing_hourlycost (hour, source_id, model_id, dims_id, reason_id, component, tokens, cost, "
        "currency, price_version_id) SELECT h, %s, m.id, d.id, %s, 0, 120000, 1.2, 'CNY', %s "
        "FROM unnest(%s::timestamptz[]) h CROSS JOIN ingest_servedmodel m CROSS JOIN ingest_dimset d "
        "WHERE d.business_line <> ''",
        [key.key.id, reasons["effective.input"], version.id, days],
    )
    month = now.date().replace(day=1)
    sql(
        "INSERT INTO ledger_budget (business_line, month, currency, amount, updated_at) "
        "SELECT 'bl-' || b, %s, 'CNY', CASE WHEN b %% 100 = 0 THEN "
        "(SELECT sum(cost) FROM pricing_hourlycost c JOIN ingest_dimset d ON d.id = c.dims_id "
        " WHERE d.business_line = 'bl-' || b AND c.hour >= %s) / 0.85 ELSE 1000000 END, now() "
        "FROM generate_series(1, %s) b",
        [month, datetime.combine(month, datetime.min.time(), tzinfo=UTC), lines],
    )
    sql("UPDATE accounts_collectorkey SET last_seen_at = %s", [now])
    sql("ANALYZE")
    return {"secret": key.secret, "seconds": round(time.monotonic() - started, 1)}


def cycles(count: int) -> list[dict[str, Any]]:
    from apps.alerts.evaluation import rule_evaluate
    from apps.alerts.models import Rule

    names = dict(Rule.objects.filter(enabled=True).values_list("id", "name"))
    results = []
    for _ in range(count):
        per_rule, alerts = {}, 0
        for rule_id in sorted(names):  # every rule, whatever its interval
            started = time.monotonic()
            alerts += len(rule_evaluate(rule_id=rule_id))
            per_rule[names[rule_id]] = round(time.monotonic() - started, 3)
        results.append({"seconds": round(sum(per_rule.values()), 3), "alerts": alerts, "per_rule": per_rule})
        print(f"  cycle: {results[-1]['seconds']:.2f} s, {alerts} alerts, slowest rule {max(per_rule.values()):.2f} s")
    return results


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "costplatform", *args],
        cwd=REPO,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def latency(secret: str, trials: int, workdir: Path) -> list[float]:
    from django.conf import settings
    from django.test import Client

    from apps.alerts.models import Channel
    from tests.alerts.receivers import Receiver

    receiver = Receiver()
    Channel.objects.create(name="bench", kind="webhook", url=receiver.url(), secret="bench-secret", min_severity=10)
    env = {**os.environ, "COSTPLATFORM_OUTBOUND_ALLOW": "127.0.0.1/32", "SECRET_KEY": settings.SECRET_KEY}
    worker = spawn(
        ["worker", "--concurrency", "4", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
        env,
        workdir / "worker.log",
    )
    beat = spawn(["beat", "--loglevel", "INFO"], env, workdir / "beat.log")
    client, seen = Client(), 0
    times = []
    try:
        time.sleep(5)  # worker and beat up
        for trial in range(1, trials + 1):
            line = f"bl-{trial}"
            records = [
                {"record_id": f"bench-{trial}-{i}", "ts": datetime.now(UTC).isoformat(), "model": f"model-{i % 20 + 1}",
                 "dims": {"business_line": line}, "tokens": {"prompt": 3000, "completion": 1000},
                 "outcome": {"status": "ok", "finish_reason": "stop"}}
                for i in range(100)
            ]  # fmt: skip
            started = time.monotonic()
            response = client.post("/api/v1/records", json.dumps({"records": records}), content_type="application/json",
                                   HTTP_AUTHORIZATION=f"Bearer {secret}")  # fmt: skip
            assert response.status_code < 300, response.content
            deadline = started + 120
            while time.monotonic() < deadline:
                found = [r for r in receiver.received[seen:] if line in r.json()["title"]]
                if found:
                    break
                time.sleep(0.05)
            if not found:
                raise SystemExit(f"{line}: no alert delivered within 120 s (see {workdir}/worker.log, beat.log)")
            seen = len(receiver.received)
            times.append(round(time.monotonic() - started, 2))
            print(f"  {line}: ingested -> delivered in {times[-1]:.1f} s", flush=True)
    finally:
        for process in (beat, worker):
            process.terminate()
            process.wait(30)
        receiver.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--business-lines", type=int, default=1000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3, help="latency trials (0: skip)")
    parser.add_argument(
        "--hour-margin", type=float, default=600, help="seconds the run needs in one hour; with less it waits (600)"
    )
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    db_recreate(url)
    setup(url)
    # The baseline is generated for the hour under way and the trials' spike is judged in it: a run
    # that crosses the hour's end would have the detector read the next hour, which holds neither.
    left = 3600 - datetime.now(UTC).timestamp() % 3600
    if left < args.hour_margin:
        print(f"waiting {left:.0f} s for the next hour: the run needs {args.hour_margin:.0f} s within one", flush=True)
        time.sleep(left + 1)
    now = datetime.now(UTC)
    print(f"generating {args.business_lines} business lines x {args.models} models ...", flush=True)
    generated = generate(args.business_lines, args.models, now)
    print(f"  {generated['seconds']} s", flush=True)
    measured = cycles(args.cycles)
    workdir = REPO / "bench" / "results"
    workdir.mkdir(exist_ok=True)
    times = latency(generated["secret"], args.trials, workdir) if args.trials else []
    steady = [c["seconds"] for c in measured[1:]] or [measured[0]["seconds"]]
    result = {
        "checkout": checkout_describe(),
        "at": now.isoformat(),
        "business_lines": args.business_lines,
        "models": args.models,
        "cycles": measured,
        "cycle_first_s": measured[0]["seconds"],
        "cycle_steady_median_s": statistics.median(steady),
        "target_cycle_s": TARGET_CYCLE_S,
        "latency_s": times,
        "target_latency_s": TARGET_LATENCY_S,
        "evaluate_every_s": int(os.environ.get("COSTPLATFORM_ALERTS_EVALUATE_EVERY", "30")),
    }
    out = workdir / f"alerts-{now:%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k not in ("cycles", "checkout")}, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
