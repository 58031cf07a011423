"""The cluster keeps its promises when nodes fail (devtools/cluster/topology.py): while the shipper
streams records to nginx, a web node is killed, the standby stopped (pages keep answering from the
primary), both restarted; a worker is killed mid-task (a reclassify run held at a day's lock) and
the other worker finishes it. Then, by SQL on the primary: every record once, token sums and
rollups equal to what was sent, the run done once, every alert delivered once or marked failed
(a worker killed as they were sent); the standby caught up and serving pages again.

`make test` runs the short form; `make cluster` (CLUSTER_FULL=1) streams more records."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import requests

from apps.classification.services import _DAY_LOCK as CLASSIFY_DAY_LOCK
from apps.classification.services import RUN_KIND as RECLASSIFY_KIND
from costplatform.celery import app
from devtools.cluster.topology import DATABASE, PASSWORD, USER, Cluster
from tests.cluster.conftest import TABLE
from tests.faults.harness import Hook, Stream, assert_stored_once, lock_waiters, ops, scalar, stored, wait_until
from tests.faults.stream import record_at
from tests.faults.test_faults import deliveries

pytestmark = pytest.mark.slow

FULL = os.environ.get("CLUSTER_FULL") == "1"
RECORDS = 20_000 if FULL else 2_000
RATE = 1_000.0 if FULL else 200.0
START = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
MAX_LAG = 10
ALERTS = 30 if FULL else 6


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cluster = Cluster(
        extra_env={
            "COSTPLATFORM_REPLICA_CHECK_SECONDS": "0.5",
            "COSTPLATFORM_REPLICA_MAX_LAG_SECONDS": str(MAX_LAG),
            "COSTPLATFORM_ALERTS_RETRY_DELAYS": "1,1",  # 3 attempts, a second apart
        }
    )
    try:
        yield cluster.up()
    except BaseException:
        print(f"cluster logs kept in {cluster.root}")
        cluster.down(keep=True)
        raise
    cluster.down()


def _direct(cluster: Cluster) -> str:
    assert cluster.primary is not None
    return cluster.primary.url(DATABASE)


def _usage(cluster: Cluster) -> int:
    """Records the usage API counts through nginx; it must answer, within 5 s."""
    began = time.monotonic()
    answer = requests.get(
        f"{cluster.url}/api/v1/usage",
        params={"from": (START - timedelta(days=1)).isoformat(), "to": (START + timedelta(days=2)).isoformat()},
        auth=(USER, PASSWORD),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[-2000:]
    assert time.monotonic() - began < 5, "a page read waited"
    return sum(row["records"] for row in answer.json()["rows"])


def _replica_lag(cluster: Cluster) -> tuple[int, float]:
    """(bytes of WAL the standby has not replayed, seconds since the last commit it replayed)."""
    assert cluster.standby is not None
    lsn = scalar(_direct(cluster), "SELECT pg_current_wal_lsn()::text")
    with psycopg.connect(cluster.standby.url(DATABASE), autocommit=True) as conn:
        row = conn.execute(
            "SELECT greatest(%s::pg_lsn - pg_last_wal_replay_lsn(), 0)::bigint, "
            "coalesce(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 0)::float8",
            [lsn],
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1])


def _post(cluster: Cluster, prefix: str, count: int) -> None:
    body = {"records": [record_at(prefix, n, START, 1) for n in range(count)]}
    answer = requests.post(
        f"{cluster.url}/api/v1/records", json=body, headers={"Authorization": f"Bearer {cluster.key}"}, timeout=30
    )
    assert answer.status_code in (200, 201, 202), answer.text


def _served_by_replica(cluster: Cluster) -> bool:
    """Pause the standby's replay, write 2 records on the primary: a read that misses them came
    from the standby."""
    assert cluster.standby is not None
    _post(cluster, f"tick-{time.monotonic_ns()}", 1)
    wait_until(lambda: _replica_lag(cluster)[0] == 0, 60, "the standby to catch up")
    cluster.standby.execute(DATABASE, "SELECT pg_wal_replay_pause()")
    try:
        before = scalar(_direct(cluster), "SELECT count(*) FROM ingest_record")
        _post(cluster, f"probe-{time.monotonic_ns()}", 2)
        return _usage(cluster) == before
    finally:
        cluster.standby.execute(DATABASE, "SELECT pg_wal_replay_resume()")


def _queues(cluster: Cluster) -> dict[str, int]:
    """Consumers of each queue of the cluster's RabbitMQ virtual host."""
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "-p", cluster.vhost, "name", "consumers", "--no-table-headers"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {name: int(consumers) for name, consumers in (line.split() for line in out.splitlines() if line.strip())}


def _kill_a_worker_mid_task(cluster: Cluster) -> str:
    """Hold a day of a reclassify run at its lock, kill the worker running it, let go: the other
    worker gets the task again (acks late) and finishes the run. The worker's name."""
    url, day = _direct(cluster), START.date()
    key = (CLASSIFY_DAY_LOCK, day.toordinal())
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s::int, %s::int)", list(key))
        with app.connection_for_write(cluster.env["CELERY_BROKER_URL"]) as connection:
            app.send_task(
                "apps.classification.tasks.reclassify_run",
                [day.isoformat(), (day + timedelta(days=1)).isoformat()],
                connection=connection,
                queue="pipeline",
            )
        wait_until(lambda: lock_waiters(url, "advisory", key), 90, "the reclassify run to wait at its day")
        running = next(w for w in cluster.workers if "reclassify_run" in w.tail())
        running.kill()
        wait_until(lambda: lock_waiters(url, "advisory", key), 90, "the other worker to take the task again")
    done = f"SELECT count(*) FROM common_jobrun WHERE kind = '{RECLASSIFY_KIND}' AND status = 'done'"
    wait_until(lambda: scalar(url, done) == 1, 90, "the reclassify run to finish")
    running.start()
    return running.name


def _alerts_across_a_killed_worker(cluster: Cluster) -> str:
    """Alerts to a receiver that answers and to one that answers 500, a worker killed right after
    they are sent (maybe mid-send, maybe holding retries), the stale-send sweep run: each alert
    delivered once or marked failed, the failing receiver's all failed. A line for the table."""
    url, prefix = _direct(cluster), "cluster-alert"
    good, down = Hook(failing=False), Hook(failing=True)
    victim = cluster.workers[1]
    try:
        ops(cluster.env, "broadcast", "--urls", f"{good.url},{down.url}", "--count", str(ALERTS), "--prefix", prefix)
        wait_until(lambda: down.log, 60, "the first sends", 0.05)
        victim.kill()
        time.sleep(2)
        ops(cluster.env, "sweep")  # what beat does for a send its worker died in

        def final() -> bool:
            found = deliveries(url, prefix)
            return len(found) == 2 * ALERTS and all(p[-1][1] in {"sent", "failed"} for p in found.values())

        wait_until(final, 120, "every delivery to be sent or failed", 0.5)
        victim.start()
    finally:
        good.close()
        down.close()
    found = deliveries(url, prefix)
    good_channel, down_channel = sorted({channel for _, channel in found})  # made in this order
    answered, delivered = good.answered(200), 0
    for title in (f"{prefix}-{n}" for n in range(ALERTS)):
        attempts = found[title, good_channel]
        sent = [a for a in attempts if a[1] == "sent"]
        assert (attempts[-1][1], len(sent), answered[title]) in {("sent", 1, 1), ("failed", 0, 0)}, title
        delivered += len(sent)
        assert found[title, down_channel][-1][1] == "failed", title
        assert not [a for a in found[title, down_channel] if a[1] == "sent"], title
    failed = ALERTS - delivered
    return f"alerts: {delivered} of {ALERTS} delivered once, {failed} marked failed; to the 500 receiver all failed"


def test_the_cluster_keeps_every_record_once_through_node_faults(cluster: Cluster, tmp_path: Path) -> None:
    url = _direct(cluster)
    assert cluster.standby is not None
    key_id = scalar(url, "SELECT id FROM accounts_collectorkey WHERE name = 'cluster'")
    stream = Stream(cluster.url, cluster.key, "cluster", RECORDS, START, 6, tmp_path, RATE, key_id).run()
    faults, answered = [], 0

    stream.wait_submitted(0.15, timeout=120)
    cluster.webs[0].kill()
    faults.append("web node 0 killed")
    stream.wait_submitted(0.35, timeout=120)
    cluster.standby.stop()
    faults.append("standby stopped")
    for _ in range(3):
        _usage(cluster)  # answered, from the primary
        answered += 1
    stream.wait_submitted(0.55, timeout=120)
    cluster.restart_web(0)
    cluster.standby.start()
    stream.wait(timeout=300)
    faults.append(f"{_kill_a_worker_mid_task(cluster)} killed mid-task")
    alerts = _alerts_across_a_killed_worker(cluster)
    faults.append(f"{cluster.workers[1].name} killed while sending alerts")

    found = stored(url, key_id)
    assert_stored_once(found, stream.sent())
    wait_until(lambda: _replica_lag(cluster)[0] == 0, 120, "the standby to catch up")
    lag_bytes, lag_seconds = _replica_lag(cluster)
    by_replica = _served_by_replica(cluster)
    named = ("pipeline", "ledger", "alerts", "audits")

    # The restarted worker consumes its queues again: every named queue has both workers.
    def consumed() -> dict[str, int] | None:
        queues = _queues(cluster)
        return queues if all(queues.get(name, 0) == len(cluster.workers) for name in named) else None

    queues = wait_until(consumed, 90, "both workers to consume every named queue")
    TABLE.extend(
        [
            f"faults: {'; '.join(faults)}",
            f"records sent {len(stream.sent().ids)}, stored {len(found.ids)}, "
            f"lost {len(stream.sent().ids - found.ids.keys())}, duplicates {found.duplicates}",
            "token sums and hourly rollups equal to what was sent: yes; reclassify run done once: yes",
            alerts,
            f"pages answered while the standby was down: {answered} of 3",
            f"replica lag after the faults: {lag_bytes} bytes, last commit replayed {lag_seconds:.1f} s ago",
            f"pages served by the replica again: {'yes' if by_replica else 'NO'}",
            "queues (consumers): " + ", ".join(f"{name} {queues[name]}" for name in named),
        ]
    )
    assert by_replica
