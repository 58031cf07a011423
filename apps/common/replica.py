"""Which reads may come from the hot standby: the opt-in marker the database router reads.

Nothing reads from the replica unless its caller said so: `with replica_reads():` around a unit
of read-only work (the page middleware, costplatform/middleware.py, puts it around the pages and
report APIs it names). Inside it, Django's router (costplatform/routers.py) sends the ORM's reads
to the replica while the replica is up and its replay lag is under the bound; raw SQL reads ask
`read_connection()` for the same choice. Writes, and every read inside a transaction on the
primary, stay on the primary whatever the marker says.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper


@dataclass
class ReplicaReads:
    """What one opted-in unit of work read: whether any read went to the replica, the largest
    replay lag (seconds) seen when it did, and `off` once the replica failed it mid-way."""

    used: bool = False
    lag: float = 0.0
    off: bool = False

    def chose_replica(self, lag: float) -> None:
        self.used = True
        self.lag = max(self.lag, lag)


_reads: ContextVar[ReplicaReads | None] = ContextVar("replica_reads", default=None)


@contextmanager
def replica_reads() -> Iterator[ReplicaReads]:
    """Mark the block's reads as allowed on the replica; yields what they did."""
    reads = ReplicaReads()
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


def replica_reads_now() -> ReplicaReads | None:
    """The marker of the block running now, None outside every `replica_reads()`."""
    return _reads.get()


def read_connection(model: Any = None) -> BaseDatabaseWrapper:
    """The connection a raw SQL read (of `model`'s table, or of page data when None) uses now:
    the router's choice, as the ORM's reads get it."""
    return connections[router.db_for_read(model)]
