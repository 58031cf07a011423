"""Reads from a real hot standby: a private primary, a standby made from it with pg_basebackup -R
streaming from it, and the platform under gunicorn with DATABASE_REPLICA_URL set.

Which copy served a read is seen in what it returned: while the standby's replay is paused, a batch
written on the primary is on the primary only, so the usage API counts it only when it read the
primary."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from tests.faults.harness import wait_until
from tests.faults.postgres import PrivatePostgres
from tests.faults.stream import record_at
from tests.processes import PlatformServer

pytestmark = pytest.mark.slow

DATABASE = "cluster"
MAX_LAG = 6  # seconds: COSTPLATFORM_REPLICA_MAX_LAG_SECONDS of the web node
START = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)


@dataclass
class Pair:
    primary: PrivatePostgres
    standby: PrivatePostgres
    platform: PlatformServer
    sent: int = 0

    def send(self, prefix: str, count: int) -> None:
        body = {"records": [record_at(prefix, n, START, 1) for n in range(count)]}
        answer = requests.post(
            f"{self.platform.url}/api/v1/records",
            json=body,
            headers={"Authorization": f"Bearer {self.platform.key}"},
            timeout=30,
        )
        assert answer.status_code in (200, 201, 202), answer.text
        self.sent += count

    def usage_records(self) -> int:
        """Records the usage API counts (from whichever copy the router chose), in its time."""
        started = time.monotonic()
        answer = requests.get(
            f"{self.platform.url}/api/v1/usage",
            params={"from": (START - timedelta(days=1)).isoformat(), "to": (START + timedelta(days=1)).isoformat()},
            auth=("tester", "pw-for-tests-only"),
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert time.monotonic() - started < 5, "a read waited on the replica"
        return sum(row["records"] for row in answer.json()["rows"])

    def caught_up(self) -> bool:
        lsn = self.primary.query(DATABASE, "SELECT pg_current_wal_lsn()")
        return bool(self.standby.query(DATABASE, f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"))

    def pause_replay(self) -> None:
        """Pause the standby's replay just after it replayed a commit: behind the primary, the
        router counts the lag from the last commit replayed, so it starts near 0 here."""
        self.send(f"tick-{self.sent}", 1)
        wait_until(self.caught_up, 30, "the standby to catch up")
        self.standby.execute(DATABASE, "SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self.standby.execute(DATABASE, "SELECT pg_wal_replay_resume()")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    workdir = tmp_path_factory.mktemp("replica")
    primary = PrivatePostgres().init()
    standby: PrivatePostgres | None = None
    platform = PlatformServer(workdir, database_url=primary.url(DATABASE))
    try:
        platform.setup()
        standby = primary.standby()
        platform.env.update(
            DATABASE_REPLICA_URL=standby.url(DATABASE),
            COSTPLATFORM_REPLICA_MAX_LAG_SECONDS=str(MAX_LAG),
            COSTPLATFORM_REPLICA_CHECK_SECONDS="0.2",
            COSTPLATFORM_REPLICA_NOTICE_SECONDS="1",
        )
        platform.start()
        yield Pair(primary, standby, platform)
    finally:
        platform.kill()
        if standby is not None:
            standby.close()
        primary.close()


def _logged_in(platform: PlatformServer) -> requests.Session:
    session = requests.Session()
    session.get(f"{platform.url}/login/", timeout=30)
    answer = session.post(
        f"{platform.url}/login/",
        data={
            "username": "tester",
            "password": "pw-for-tests-only",
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": f"{platform.url}/login/"},
        timeout=30,
    )
    assert answer.ok and "sessionid" in session.cookies, answer.text[-2000:]
    return session


def _overview(session: requests.Session, platform: PlatformServer) -> Any:
    answer = session.get(f"{platform.url}/overview/", timeout=30)
    assert answer.status_code == 200, answer.text[-2000:]
    return answer.text


def test_a_fresh_replica_serves_page_reads_and_a_lagging_one_does_not(pair: Pair) -> None:
    pair.send("fresh", 5)
    wait_until(lambda: pair.usage_records() == pair.sent, 30, "the usage API to count what was sent")
    pair.pause_replay()
    try:
        pair.send("primary-only", 3)  # on the primary; the standby has not replayed it
        # Fresh (lag under the bound): the read comes from the standby, without the new batch.
        assert pair.usage_records() == pair.sent - 3
        # The standby falls behind the bound: the same read comes from the primary.
        time.sleep(MAX_LAG + 1)
        assert pair.usage_records() == pair.sent
    finally:
        pair.resume_replay()
    wait_until(pair.caught_up, 30, "the standby to catch up")
    assert pair.usage_records() == pair.sent


def test_a_page_read_from_a_lagging_replica_says_how_old_it_is(pair: Pair) -> None:
    session = _logged_in(pair.platform)
    assert "read from a replica" not in _overview(session, pair.platform)  # caught up: no notice
    pair.pause_replay()
    try:
        pair.send("aged", 2)
        time.sleep(2)
        page = _overview(session, pair.platform)
        assert "old (read from a replica)" in page
        time.sleep(MAX_LAG)
        assert "read from a replica" not in _overview(session, pair.platform)  # from the primary now
    finally:
        pair.resume_replay()


def test_a_stopped_replica_sends_reads_to_the_primary_until_it_is_back(pair: Pair) -> None:
    wait_until(pair.caught_up, 30, "the standby to catch up")
    pair.standby.stop()
    try:
        pair.send("while-down", 4)
        for _ in range(5):  # every read answered, quickly (usage_records checks the time), in full
            assert pair.usage_records() == pair.sent
    finally:
        pair.standby.start()
    wait_until(pair.caught_up, 60, "the restarted standby to catch up")
    pair.pause_replay()
    try:
        pair.send("after-restart", 1)
        assert pair.usage_records() == pair.sent - 1  # the standby serves again
    finally:
        pair.resume_replay()
