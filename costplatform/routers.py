"""Reads from a hot standby (docs/scaling.md, "Reads from the replica").

With DATABASE_REPLICA_URL set, settings add the `replica` database and this router. A read goes
to the replica only when all of these hold, else to the primary (`default`):

- it runs inside `apps.common.replica.replica_reads()` (the page middleware puts it around the views
  marked `@replica_view`);
- its model's app is not one of ALWAYS_PRIMARY (sign-in, sessions, roles and scopes, the audit
  log: who may see what must never lag behind a change to it);
- the primary connection is in no transaction (`transaction.atomic`, `select_for_update` and the
  advisory locks all run in one), so a read never misses what its own transaction wrote;
- the replica answers and its replay lag is at most REPLICA_MAX_LAG_SECONDS.

The replica's state is measured at most every REPLICA_CHECK_SECONDS per process: a replica that
refuses connections costs one refused connect per process and interval, not one per query.
Every write goes to the primary.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections

from apps.common.replica import replica_reads_now

log = logging.getLogger(__name__)

PRIMARY = "default"
REPLICA = "replica"
ALWAYS_PRIMARY = frozenset(
    {"admin", "auth", "contenttypes", "sessions", "axes", "accounts", "auditlog", "django_celery_beat"}
)

# The primary's WAL position, then on the replica: how far its replay is, in seconds. Caught up
# (replayed past what the primary had written) is 0 however long ago the last commit was; behind,
# it is the age of the last transaction it replayed.
_PRIMARY_LSN_SQL = "SELECT pg_current_wal_lsn()"
_REPLICA_LAG_SQL = """
SELECT pg_is_in_recovery(),
       coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false),
       extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8
"""


@dataclass
class ReplicaState:
    lag: float | None  # seconds behind the primary; None: down, not a standby, or never replayed
    checked_at: float  # time.monotonic() of the measurement


class ReplicaHealth:
    """The replica's lag, measured at most every `REPLICA_CHECK_SECONDS` in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: ReplicaState | None = None

    def lag(self) -> float | None:
        with self._lock:
            now = time.monotonic()
            if self._state is None or now - self._state.checked_at >= settings.REPLICA_CHECK_SECONDS:
                self._state = ReplicaState(self._measure(), now)
            return self._state.lag

    def failed(self) -> None:
        """A query on the replica failed: it is down until the next measurement."""
        with self._lock:
            self._state = ReplicaState(None, time.monotonic())
        _close_quietly(REPLICA)

    def forget(self) -> None:
        with self._lock:
            self._state = None

    def _measure(self) -> float | None:
        try:
            with connections[PRIMARY].cursor() as cursor:
                cursor.execute(_PRIMARY_LSN_SQL)
                primary_lsn = cursor.fetchone()[0]
            with connections[REPLICA].cursor() as cursor:
                cursor.execute(_REPLICA_LAG_SQL, [primary_lsn])
                standby, caught_up, age = cursor.fetchone()
        except DatabaseError as exc:
            log.warning("replica unavailable, reading from the primary: %s", exc)
            _close_quietly(REPLICA)
            return None
        if not standby:
            log.warning("the replica is not in recovery (promoted?): reading from the primary")
            return None
        return 0.0 if caught_up else age


def _close_quietly(alias: str) -> None:
    if alias not in settings.DATABASES:
        return
    try:
        connections[alias].close()
    except DatabaseError:
        pass


health = ReplicaHealth()


class ReplicaRouter:
    """Django database router: opted-in reads to the replica while it is fresh (module docstring)."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        reads = replica_reads_now()
        if reads is None or reads.off:
            return None
        if model is not None and model._meta.app_label in ALWAYS_PRIMARY:
            return PRIMARY
        if connections[PRIMARY].in_atomic_block:
            return PRIMARY
        lag = health.lag()
        if lag is None or lag > settings.REPLICA_MAX_LAG_SECONDS:
            return PRIMARY
        reads.chose_replica(lag)
        return REPLICA

    def db_for_write(self, model: Any, **hints: Any) -> str:
        # Also for an object read from the replica: its save goes to the primary.
        return PRIMARY

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, two copies of it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None
