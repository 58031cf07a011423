"""`make bench` (ingest) and `make bench-wal` in short: a few thousand records through each path
(tests/bench/short.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.bench import short


def test_bench_ingest_runs_every_path_to_its_table(tmp_path: Path) -> None:
    args = (f"--records 2000 --batch-size 500 --naive-records 200 --naive-batch-size 100 --workers 1 --quiet-wait 0 "
            f"--json {tmp_path}/i.json")  # fmt: skip
    with short.database("bench_ingest") as url:
        ran = short.run("bench", args, env={"DATABASE_URL": url})

    assert ran.returncode == 0 and not short.crashed(ran), ran
    paths = (r"\(a\) DRF ModelSerializer", r"\(a\) the same, bulk_create", r"\(b\) ingest API", r"\(c\) raw binary")
    for path in paths:
        assert re.search(rf"^\| {path}.*\| +(2,000|200) \|", ran.output, re.M), ran
    assert re.search(r"^  <= \d+ bytes per record +\d+  (pass|FAIL)$", ran.output, re.M), ran


def test_bench_wal_measures_every_stage() -> None:
    with short.database("bench_wal") as url:
        ran = short.run("bench-wal", "--records 2000", env={"DATABASE_URL": url})

    assert ran.returncode == 0 and not short.crashed(ran), ran
    result, _ = json.JSONDecoder().raw_decode(ran.output, ran.output.index("{"))
    assert result["records"] == 2000 and len(result["stages"]) == 3, ran
    assert all(stage["wal_bytes"] > 0 for stage in result["stages"]), ran
