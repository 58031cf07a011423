"""Every benchmark target of the Makefile has a short form in the suite (tests/bench/short.py):
a new `make bench-*` without one fails here."""

from __future__ import annotations

import re

from tests.processes import ROOT

TARGET = re.compile(r"^(bench(?:-[\w-]+)?|soak):", re.M)
SHORT_FORM = re.compile(r"""short\.run\(\s*["']([\w-]+)["']""")


def test_every_bench_target_has_a_short_form_in_the_suite() -> None:
    targets = set(TARGET.findall((ROOT / "Makefile").read_text()))
    run = {name for path in (ROOT / "tests").rglob("test_*.py") for name in SHORT_FORM.findall(path.read_text())}

    assert {"bench", "bench-pages", "soak"} <= targets  # the pattern still reads the Makefile
    assert targets - run == set(), "bench targets without a short form in tests/: add one (tests/bench/short.py)"
    assert run - targets == set(), "short forms of targets the Makefile no longer has"
