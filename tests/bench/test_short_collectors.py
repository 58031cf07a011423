"""`make bench-shipper` and `make bench-proxy` in short: a few thousand records into the spool, and
a few dozen requests through the proxy (without LiteLLM's, which lives in a venv of its own)
(tests/bench/short.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import short


def test_bench_shipper_runs_every_part_to_its_verdict(tmp_path: Path) -> None:
    ran = short.run("bench-shipper", f"--records 2000 --paced-seconds 0.2 --dir {tmp_path}", timeout=120)

    # Its exit status says whether the spool kept the target rate, which a busy machine may not.
    assert ran.returncode in (0, 1) and not short.crashed(ran), ran
    for part in (r"\(a\)\+\(b\) submit\(\)", r"\(b\) submit\(\) paced", r"\(c\) submit_durable", r"\(d\) submit\(\)"):
        assert re.search(rf"^{part}", ran.output, re.M), ran
    verdict = r"^sustained into the spool: [\d,]+ records/s \(target [\d,]+\): (met|MISSED)$"
    assert re.search(verdict, ran.output, re.M), ran


def test_bench_proxy_measures_every_case_beside_going_direct() -> None:
    ran = short.run("bench-proxy", "--requests 20 --concurrency 2 --warmup 2 --no-litellm", timeout=120)

    assert ran.returncode == 0 and not short.crashed(ran), ran
    rows = re.findall(r"^\| (chat|stream) \| (1|2) \| (total|ttfb) \| 20 \| [\d.]+ / [\d.]+ \| ", ran.output, re.M)
    assert len(rows) == 6, ran  # chat total, stream ttfb and total, at concurrency 1 and 2
    assert re.search(r"^costplatform spool after the run: [1-9]\d* bytes of records$", ran.output, re.M), ran
