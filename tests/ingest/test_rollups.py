"""The hourly rollups always equal the sums of the raw records they summarise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.ingest.contract import RecordV1
from apps.ingest.models import TOKEN_FIELDS
from apps.pipeline.records import records_store
from tests.factories import collector_key

BASE = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=3)


@st.composite
def token_records(draw: st.DrawFn) -> dict:
    prompt = draw(st.integers(0, 10**6))
    completion = draw(st.integers(0, 10**5))
    draft = draw(st.integers(0, 500))
    system = draw(st.integers(0, prompt))
    dims = draw(
        st.dictionaries(
            st.sampled_from(["business_line", "team", "feature", "user", "conversation_id"]),
            st.sampled_from(["a", "b", "c"]),
            max_size=4,
        )
    )
    return {
        "record_id": draw(st.text("abcdef0123456789", min_size=1, max_size=6)),
        "ts": (BASE + timedelta(minutes=draw(st.integers(0, 60 * 30)))).isoformat(),
        "model": draw(st.sampled_from(["big", "small"])),
        "dims": dims,
        "tokens": {
            "prompt": prompt,
            "prompt_cached": draw(st.integers(0, prompt)),
            "completion": completion,
            "system": system,
            "tool": draw(st.integers(0, prompt - system)),
            "structural": draw(st.integers(0, completion)),
            "padding": draw(st.integers(0, 100)),
            "draft": draft,
            "draft_accepted": draw(st.integers(0, draft)),
            "recomputed": draw(st.integers(0, 1000)),
        },
        "outcome": {"status": draw(st.sampled_from(["ok", "error", "aborted"]))},
    }


def sums(sql: str) -> dict[tuple, tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return {tuple(row[:3]): tuple(row[3:]) for row in cursor.fetchall()}


RAW = f"""
SELECT date_trunc('hour', r.ts, 'UTC'), r.model_id, coalesce(d.dims->>'business_line', ''), count(*),
       {", ".join(f"sum(r.{f})" for f in TOKEN_FIELDS)}
FROM ingest_record r JOIN ingest_dimset d ON d.id = r.dims_id GROUP BY 1, 2, 3
"""
ROLLUP = f"""
SELECT u.hour, u.model_id, coalesce(d.dims->>'business_line', ''), sum(u.records),
       {", ".join(f"sum(u.{f})" for f in TOKEN_FIELDS)}
FROM ingest_hourlyusage u JOIN ingest_dimset d ON d.id = u.dims_id GROUP BY 1, 2, 3
"""
# Every processed token lands in one class (apps/classification/engine.py): per hour, model and
# line, the class rollup holds the records' processed tokens once, whichever way a batch went in
# (as it was, or, holding records stored before, with those left out).
RAW_PROCESSED = """
SELECT date_trunc('hour', r.ts, 'UTC'), r.model_id, coalesce(d.dims->>'business_line', ''),
       sum(r.prompt + r.completion + r.padding + r.recomputed + r.draft - r.draft_accepted)
FROM ingest_record r JOIN ingest_dimset d ON d.id = r.dims_id GROUP BY 1, 2, 3
"""
CLASSED = """
SELECT c.hour, c.model_id, coalesce(d.dims->>'business_line', ''), sum(c.tokens)
FROM classification_hourlyclass c JOIN ingest_dimset d ON d.id = c.dims_id GROUP BY 1, 2, 3
"""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(token_records(), max_size=30), min_size=1, max_size=4), resend=st.booleans())
def test_rollups_equal_the_raw_sums(db, batches, resend):
    with transaction.atomic():
        source = collector_key().key.pk
        for batch in batches + (batches[:1] if resend else []):
            unique = {(r["record_id"], r["ts"]): r for r in batch}  # decode_batch removes repeats
            typed = [msgspec.convert(r, RecordV1, strict=False) for r in unique.values()]
            records_store(source_id=source, records=typed)

        assert sums(RAW) == sums(ROLLUP)
        assert {k: v for k, v in sums(RAW_PROCESSED).items() if v != (0,)} == sums(CLASSED)
        transaction.set_rollback(True)
