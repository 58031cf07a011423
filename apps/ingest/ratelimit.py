"""Per collector key rate limits on ingest: two token buckets, requests/s and records/s.

The buckets live in PostgreSQL (accounts.RateBucket), not in the process: every gunicorn
worker and every host behind the load balancer shares them, and the embedded set-up (which
has no Redis) limits the same way. One upsert refills and takes in a single statement, so
concurrent requests of one key serialise on its row for that statement only.

A bucket holds up to `rate x COSTPLATFORM_RATE_BURST_SECONDS` tokens. A request is admitted
while the bucket holds what it needs (a batch larger than the whole bucket only needs a full
bucket), and then takes its full cost, which may leave the bucket in debt: a big batch is
never refused for ever, and the next ones wait for the debt to be repaid."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from apps.accounts.models import CollectorKey, RateBucket
from apps.common.composed import SQL, table, text

REQUESTS = "requests"
RECORDS = "records"

_REFILLED = SQL(
    "least(%(capacity)s::float8, b.tokens + %(rate)s::float8 * greatest(0, extract(epoch FROM EXCLUDED.at - b.at)))"
)
_TAKE = text(
    SQL("""
INSERT INTO {buckets} AS b (key_id, kind, tokens, at, admitted)
VALUES (%(key)s, %(kind)s, %(capacity)s::float8 - %(cost)s, clock_timestamp(), true)
ON CONFLICT (key_id, kind) DO UPDATE SET
    tokens = CASE WHEN {refilled} >= %(needed)s THEN {refilled} - %(cost)s ELSE {refilled} END,
    at = EXCLUDED.at,
    admitted = {refilled} >= %(needed)s
RETURNING b.admitted, b.tokens
""").format(buckets=table(RateBucket), refilled=_REFILLED)
)


class RateLimited(Exception):
    """The key has used its rate; try again after `retry_after` seconds."""

    def __init__(self, *, kind: str, rate: int, retry_after: int) -> None:
        self.kind, self.rate, self.retry_after = kind, rate, retry_after
        super().__init__(f"Rate limit of this collector key exceeded: {rate} {kind} per second.")


# An unreadable body is charged to the records bucket as if it held a record per this many
# bytes (a record is about 500 bytes of JSON): garbage costs what records of its size would.
BODY_BYTES_PER_RECORD = 512


def body_cost(size: int) -> int:
    """The records an unreadable body of `size` bytes is charged as."""
    return max(1, size // BODY_BYTES_PER_RECORD)


@dataclass(frozen=True)
class Limit:
    kind: str
    rate: int  # per second; 0 = unlimited

    @property
    def capacity(self) -> float:
        return self.rate * settings.INGEST_RATE_BURST_SECONDS


def key_limit(key: CollectorKey, kind: str) -> Limit:
    """The key's own limit, or the platform default."""
    if kind == REQUESTS:
        own, default = key.rate_requests, settings.INGEST_RATE_REQUESTS
    else:
        own, default = key.rate_records, settings.INGEST_RATE_RECORDS
    return Limit(kind=kind, rate=own if own is not None else default)


def rate_take(*, key: CollectorKey, kind: str, cost: int) -> None:
    """Take `cost` from the key's bucket of `kind`, or raise RateLimited (nothing taken)."""
    limit = key_limit(key, kind)
    if limit.rate <= 0 or cost <= 0:
        return
    needed = min(cost, limit.capacity)
    params = {
        "key": key.pk,
        "kind": kind,
        "capacity": limit.capacity,
        "rate": limit.rate,
        "cost": cost,
        "needed": needed,
    }
    with connection.cursor() as cursor:
        cursor.execute(_TAKE, params)
        admitted, tokens = cursor.fetchone()
    if not admitted:
        raise RateLimited(kind=kind, rate=limit.rate, retry_after=max(1, math.ceil((needed - tokens) / limit.rate)))
