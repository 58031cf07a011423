"""`make bench-reclassify` and `make bench-pages` in short: a month of a few thousand records over
two days, built as the long forms build their 10,000,000 (tests/bench/short.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench import short


def test_bench_reclassify_runs_to_its_table(tmp_path: Path) -> None:
    with short.database("bench_reclassify") as url:
        ran = short.run("bench-reclassify", f"--records 5000 --days 2 --quiet-wait 0 --json {tmp_path}/r.json",
                        env={"DATABASE_URL": url})  # fmt: skip

    assert ran.returncode == 0 and not short.crashed(ran), ran
    assert re.search(r"^\| reclassify_run +\| +5,000 \|", ran.output, re.M), ran
    assert re.search(r"^\| reprice_run +\| +5,000 \|", ran.output, re.M), ran
    assert "target: 5,000 records in <=" in ran.output and (tmp_path / "r.json").exists(), ran


def test_bench_pages_follows_the_drill_down_to_a_record_and_times_every_page(tmp_path: Path) -> None:
    with short.database("bench_pages") as url:
        ran = short.run(
            "bench-pages",
            f"--records 20000 --days 2 --repeat 1 --min-repeat 1 --quiet-wait 0 --json {tmp_path}/p.json",
            env={"DATABASE_URL": url},
        )

    assert ran.returncode == 0 and not short.crashed(ran), ran
    rows = re.findall(r"^\| (finance|engineer|engineer-all) +\| (.+?) +\| +1 \|", ran.output, re.M)
    finance = [page for role, page in rows if role == "finance"]
    drilled = ["waste: class", "waste: reason", "waste: model", "waste: business_line", "waste: feature",
               "waste: step", "requests"]  # fmt: skip
    assert finance[3 : 3 + len(drilled)] == drilled and "record" in finance, ran
    assert {"audit report", "budgets", "finance"} <= set(finance), ran
    assert [page for role, page in rows if role == "engineer-all"] == ["rules: try (newest)", "collectors"], ran
    assert re.search(rf"^\d+ of {len(rows)} pages within 300 ms p95$", ran.output, re.M), ran
