"""`make soak` in short: the platform under gunicorn with a Celery worker and beat, a 2 s ramp and
6 s of paced ingest with the pages read beside it (tests/bench/short.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.bench import short


def test_soak_stores_what_it_sent_without_errors(tmp_path: Path) -> None:
    args = f"--minutes 0.1 --ramp-seconds 2 --sample-every 1 --batch 100 --clients 1 --workdir {tmp_path}"
    with short.database("soak") as url:
        ran = short.run("soak", args, env={"DATABASE_URL": url, "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"]})

    # Its exit status also holds the pace and the memory's flatness, which six seconds on a busy
    # machine do not decide; what it stored and its processes' health they do.
    assert ran.returncode in (0, 1) and not short.crashed(ran), ran
    assert re.search(r"^process +start RSS +end RSS", ran.output, re.M), ran
    for check in ("no errors", "sent = stored", "celery alive"):
        assert re.search(rf"^  PASS  {check}$", ran.output, re.M), ran
