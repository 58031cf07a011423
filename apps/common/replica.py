"""Which reads may come from the hot standby: the opt-in marker the database router reads.

Nothing reads from the replica unless its caller said so: `with replica_reads():` around a unit
of read-only work. A view opts its GETs in where it is written, with `@replica_view` (function
views and class views alike): the page middleware (costplatform/middleware.py) reads the mark of
the view a request resolves to and puts `replica_reads()` around it. Inside it, Django's router
(costplatform/routers.py) sends the ORM's reads to the replica while the replica is up and its
replay lag is under the bound; raw SQL reads ask `read_connection()` for the same choice. Writes,
and every read inside a transaction on the primary, stay on the primary whatever the marker says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

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


_MARK = "replica_reads"
View = TypeVar("View", bound=Callable[..., Any])


def replica_view(view: View) -> View:
    """Mark a view whose GETs may read from the replica (docs/scaling.md). A view joins after
    checking that it writes nothing and needs no read of its own writes; one that streams its
    rows after returning (the FOCUS export) does not, as half of it could come from each copy.
    Put it outermost, above the role checks, on a function view, or on a view class."""
    setattr(view, _MARK, True)
    return view


def replica_view_of(view: Callable[..., Any]) -> bool:
    """Whether the view (as resolved from a URL: a function, or a class's `as_view()`) is marked."""
    marked = getattr(view, "view_class", None) or getattr(view, "cls", None) or view
    return bool(getattr(marked, _MARK, False) or getattr(view, _MARK, False))
