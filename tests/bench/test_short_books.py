"""`make bench-ledger` and `make bench-audits` in short: a month of a few thousand records closed,
and audited (tests/bench/short.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.bench import short


def test_bench_ledger_closes_adjusts_and_reads_the_month(tmp_path: Path) -> None:
    args = (f"--records 20000 --dim-sets 12 --business-lines 3 --models 3 --requests 2 "
            f"--quiet-wait 0 --json {tmp_path}/l.json")  # fmt: skip
    with short.database("bench_ledger") as url:
        ran = short.run("bench-ledger", args, env={"DATABASE_URL": url})

    # Its exit status says whether the targets were met: on a busy machine they may not be.
    assert ran.returncode in (0, 1) and not short.crashed(ran), ran
    assert re.search(r"^targets met: (True|False); results in ", ran.output, re.M), ran
    assert re.search(r"^close: [\d.]+ s, [\d,]+ lines$", ran.output, re.M), ran
    for name in ("trial_balance", "matrix", "focus"):
        assert re.search(rf"^{name}: median \d+ ms \([\d,]+ bytes\)$", ran.output, re.M), ran
    results = json.loads((tmp_path / "l.json").read_text())
    assert results["close"]["lines"] > 0 and results["rerun"]["days_computed"] == 0  # closed: nothing to redo
    assert results["adjust"]["adjusting_entries"] > 0


def test_bench_audits_times_every_finder_and_the_run() -> None:
    with short.database("bench_audits") as url:
        ran = short.run("bench-audits", "--records 3000 --conversations 200 --features 10", env={"DATABASE_URL": url})

    from apps.audits.models import KIND_LABELS

    assert ran.returncode == 0 and not short.crashed(ran), ran
    for kind in KIND_LABELS:
        assert re.search(rf"^{kind} +[\d.]+ s  \d+ findings$", ran.output, re.M), ran
    assert re.search(r"^audit_run +[\d.]+ s  \d+ findings$", ran.output, re.M), ran
