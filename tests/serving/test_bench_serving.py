"""`make bench-serving` in short (tests/bench/short.py): both real vLLM servers started (plain and
instrumented, the tiny model), one 3 s round each. Here, not in tests/bench, so that it runs on
the worker that runs the other vLLM tests (tests/conftest.py), never beside them."""

from __future__ import annotations

import re

from tests.bench import short


def test_bench_serving_loads_both_servers_to_its_tables() -> None:
    args = "--eager --rounds 1 --seconds 3 --warmup 2 --pause 0.5 --alone-rounds 0 --concurrency 2 --max-tokens 4"
    ran = short.run("bench-serving", args, timeout=480)

    assert ran.returncode == 0 and not short.crashed(ran), ran
    for server in ("plain", "instrumented"):
        assert re.search(rf"^\| {server} \| [1-9]\d* \| 0 \| ", ran.output, re.M), ran  # requests, no errors
    assert re.search(r"^\| throughput ratio instrumented / plain \| \*\*\d", ran.output, re.M), ran
    assert re.search(r"\| [\d.]+ ms \([1-9]\d* records, 0 build errors\) \|", ran.output), ran
    assert re.search(r"^\| records shipped to the sink .* \| [1-9]\d* \| - \|$", ran.output, re.M), ran
