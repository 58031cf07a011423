"""Backup and restore for real: pg_dump (custom format) of the platform database, pg_restore into
a fresh database, and the restored trial balance, records and rollups equal the original's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import psycopg
import pytest
import time_machine
from django.conf import settings

from apps.ledger.selectors import trial_balance
from apps.ledger.services.accrual import month_accrue
from apps.pricing.services import hours_price
from devtools import backup
from tests import factories
from tests.conftest import Collector

OCT = date(2026, 10, 1)


def database_url(name: str | None = None) -> str:
    db = settings.DATABASES["default"]
    return f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{name or db['NAME']}"


@pytest.fixture
def restored_url() -> Iterator[str]:
    url = database_url(f"{settings.DATABASES['default']['NAME']}_restored")
    admin, name = database_url("postgres"), url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def month_of_records(collector: Collector) -> None:
    """Records on two days of October (two partitions: October and the ones ingest made), priced
    and booked."""
    factories.price_version(effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={"*": ("2", "0.5", "6")})
    with time_machine.travel(datetime(2026, 10, 12, 12, tzinfo=UTC), tick=False):
        records = [
            factories.record(
                ts=datetime(2026, 10, 10 + i % 2, i % 24, tzinfo=UTC).isoformat(), **{"tokens.prompt": 900 + i}
            )
            for i in range(40)
        ]
        assert collector.send(records).json()["accepted"] == 40
    hours_price(start=datetime(2026, 10, 10, tzinfo=UTC), end=datetime(2026, 10, 12, tzinfo=UTC))
    month_accrue(month=OCT)


def test_a_restored_dump_has_the_same_trial_balance_records_and_rollups(
    transactional_db: None,
    seeded: None,
    collector: Collector,
    truncate_records: None,
    restored_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    month_of_records(collector)
    original = database_url()
    monkeypatch.setenv("DATABASE_URL", original)
    dump = tmp_path / "platform.dump"

    backup.dump(url=original, path=dump)
    assert backup.main(["restore", str(dump), restored_url]) == 0

    assert backup.compare(original, restored_url) == []
    assert backup.main(["drill"]) == 0  # the same on $DATABASE_URL in one command (make backup-drill)
    restored = backup.fingerprint(restored_url)
    assert restored["records"][0][1:3] == (40, sum(900 + i for i in range(40)))
    assert "ingest_record_y2026m10" in [row[0] for row in restored["record partitions"]]
    book = trial_balance(month=OCT)["currencies"][0]  # the selector finance reads, on the original
    assert book["balanced"] and book["debits"] > 0
    assert {(code, d, c) for _, _, code, d, c in restored["trial balance"]} == {
        (a["code"], a["debits"], a["credits"]) for a in book["accounts"]
    }

    # A difference is named and fails the command; a restore never goes over an existing database.
    with psycopg.connect(restored_url, autocommit=True) as conn:
        conn.execute("DELETE FROM ingest_record WHERE prompt = 900")
    assert backup.main(["compare", original, restored_url]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS records" in out and "DIFFERS trial balance" not in out
    assert backup.main(["restore", str(dump), restored_url]) == 2
