"""`make bench-alerts` in short: five business lines, two cycles, and one record-to-webhook trial
through a real Celery worker and beat evaluating every 2 s (tests/bench/short.py)."""

from __future__ import annotations

import json
import os

from tests.bench import short


def test_bench_alerts_evaluates_and_delivers() -> None:
    env = {"CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"], "COSTPLATFORM_ALERTS_EVALUATE_EVERY": "2"}
    with short.database("bench_alerts") as url:
        ran = short.run("bench-alerts", "--business-lines 5 --models 2 --cycles 2 --trials 1 --hour-margin 100",
                        env={**env, "DATABASE_URL": url}, timeout=240)  # fmt: skip

    assert ran.returncode == 0 and not short.crashed(ran), ran
    output = ran.output
    result, _ = json.JSONDecoder().raw_decode(output, output.index('{\n  "at"'))
    assert result["business_lines"] == 5 and result["cycle_steady_median_s"] >= 0, ran
    assert len(result["latency_s"]) == 1 and result["latency_s"][0] < 60, ran
