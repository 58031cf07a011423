"""Ship token records to the ingest API through a durable spool.

    python -m collectors.shipper --spool DIR --url URL --key KEY [--metrics-port N] [--once]

In a server, `Pipeline` takes records from the request path and gets them to the platform:

    submit(record)  a queue put (no I/O), safe from an asyncio event loop thread
    writer thread   drains the queue and appends to the spool, one fsync a group (group commit)
    shipper thread  reads the spool, POSTs NDJSON batches to {url}/api/v1/records with the
                    edge's one sender (wire.send.Sender), acknowledges a batch once the API
                    answered 200/207; retries connection errors, 429 and 5xx with exponential
                    backoff and full jitter (Retry-After honoured)

The API stores a record once per (source, record_id, ts), so a batch re-sent after a lost
answer only counts duplicates: delivery is at least once, storage exactly once. Records the API
refuses are kept there as rejections (GET /api/v1/rejections), so their batch is acknowledged
too. A 401/403 stops shipping (the spool keeps everything) until the key is fixed and the
process restarted. The command line ships a spool left behind by a stopped server.
Standard library, msgspec and prometheus_client only; docs/collectors.md has the details.
"""

from __future__ import annotations

import email.utils
import http.client
import logging
import queue
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, start_http_server

from wire.send import Answer, Sender
from wire.spool import GiB, MiB, Spool, SpoolBatch, SpoolClosed, SpoolFull

log = logging.getLogger(__name__)

FATAL_STATUSES = {401, 403}
RETRY_AFTER_CAP = 300.0  # seconds; a Retry-After beyond this is taken as this


def backoff_delay(
    attempt: int, *, base: float = 0.5, cap: float = 60.0, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait before retry number `attempt` (0-based): "full jitter", uniform in
    [0, min(cap, base * 2**attempt)), so many collectors coming back at once spread out."""
    return rand() * min(cap, base * 2 ** min(attempt, 32))


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """A Retry-After header (seconds or an HTTP date) as seconds from now, capped; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


# --- metrics ------------------------------------------------------------------------------


class ShipperMetrics:
    """The shipper's Prometheus metrics on one registry (created once a registry)."""

    _by_registry: weakref.WeakKeyDictionary[CollectorRegistry, ShipperMetrics] = weakref.WeakKeyDictionary()

    def __init__(self, registry: CollectorRegistry) -> None:
        self.queued = Gauge(
            "costplatform_shipper_queued_records",
            "Records taken and not yet shipped: in the in-memory queue plus unshipped in the spool.",
            registry=registry,
        )
        self.shipped = Counter(
            "costplatform_shipper_shipped_records", "Records the ingest API acknowledged.", registry=registry
        )
        self.failed = Counter(
            "costplatform_shipper_failed_requests",
            "Requests to the ingest API that failed (connection error, timeout or an HTTP error status).",
            registry=registry,
        )
        self.dropped = Counter(
            "costplatform_shipper_dropped_records",
            "Records lost before shipping: spool full (drop-oldest or refuse), queue full, unencodable.",
            registry=registry,
        )
        self.oldest_age = Gauge(
            "costplatform_shipper_oldest_record_age_seconds",
            "Age (from its ts) of the oldest record in the spool not yet shipped; 0 when none.",
            registry=registry,
        )

    @classmethod
    def on(cls, registry: CollectorRegistry) -> ShipperMetrics:
        found = cls._by_registry.get(registry)
        if found is None:
            found = cls._by_registry[registry] = cls(registry)
        return found


def serve_metrics(port: int, *, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> Any:
    """Serve the registry (default the global one) at http://addr:port/metrics from a daemon thread."""
    return start_http_server(port, addr=addr, registry=registry if registry is not None else REGISTRY)


# --- the pipeline -------------------------------------------------------------------------


@dataclass
class _Ticket:
    """Records that must be durable before their submitter goes on (or, empty, a sync marker)."""

    records: list[Any] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    taken: int = 0
    seq: int = 0  # the spool's next sequence number once this ticket's group was written


_STOP = object()
# What _ship answers besides None (delivered) and a delay in seconds.
BACK_OFF, SPLIT, HALT = -1.0, -2.0, -3.0


class Pipeline:
    """submit() → queue → writer thread → spool (fsync) → shipper thread → ingest API.

    Metrics go to `registry` (default the global one); one Pipeline a registry."""

    def __init__(
        self,
        spool_dir: Path | str,
        *,
        url: str,
        key: str,
        batch_size: int = 2000,
        flush_interval: float = 0.5,
        max_bytes: int = GiB,
        when_full: str = "drop-oldest",
        registry: CollectorRegistry | None = None,
        segment_bytes: int = 16 * MiB,
        max_queue: int = 200_000,
        compress: bool = False,
        timeout: float = 30.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 60.0,
        ship: bool = True,
        on_acked: Callable[[list[bytes]], None] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.ship = ship
        # Told of each batch the platform stored, its JSON lines (the edge's budget gate: BudgetGate.acked).
        self.on_acked = on_acked
        self.sender = Sender(url, key, timeout=timeout, compress=compress)
        self.metrics = ShipperMetrics.on(registry if registry is not None else REGISTRY)
        self.spool = Spool(
            spool_dir,
            max_bytes=max_bytes,
            segment_bytes=segment_bytes,
            when_full=when_full,
            on_drop=self.metrics.dropped.inc,
        )
        self.halted: str | None = None  # why shipping stopped for good (key refused)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._wake = threading.Event()  # the shipper should look at the spool now
        self._stopping = threading.Event()
        self._acked = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.metrics.queued.set_function(lambda: self._queue.qsize() + max(self.spool.pending, 0))
        self.metrics.oldest_age.set_function(self._oldest_age)

    # --- taking records -----------------------------------------------------------------

    def submit(self, record: Mapping[str, Any]) -> None:
        """Queue a record to be spooled and shipped; never blocks. The record must not be
        changed afterwards. It is durable within a group commit (usually milliseconds); over
        max_queue records waiting (the disk stalled) it is dropped and counted."""
        if self._queue.qsize() >= self.max_queue or self._stopping.is_set():
            self._drop(1, "the pipeline is closed" if self._stopping.is_set() else "the queue is full")
            return
        self._queue.put(record)

    def submit_durable(self, records: Iterable[Mapping[str, Any]], timeout: float | None = None) -> int:
        """Spool the records and return once they are fsync'd: how many were taken (0 when the
        spool refused them, or on timeout; records that timed out may still be written later,
        and the platform stores a record sent twice once)."""
        ticket = _Ticket(list(records))
        if not ticket.records or self._stopping.is_set():
            return 0
        self._queue.put(ticket)
        return ticket.taken if ticket.done.wait(timeout) else 0

    def sync(self, timeout: float | None = None) -> bool:
        """Whether everything submitted before this call is durable in the spool (waits up to timeout)."""
        return self._sync(timeout) is not None

    def _sync(self, timeout: float | None) -> int | None:
        if self._stopping.is_set():
            return None
        ticket = _Ticket()
        self._queue.put(ticket)
        return ticket.seq if ticket.done.wait(timeout) else None

    def flush(self, timeout: float | None = None) -> bool:
        """Whether everything submitted before this call is durable AND shipped (waits up to timeout)."""
        if self._stopping.is_set():
            return self.spool.pending == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        target = self._sync(timeout)
        if target is None:
            return False
        self._wake.set()
        with self._acked:
            return self._acked.wait_for(
                lambda: self.spool.acked_seq >= target or self.halted is not None or self._stopping.is_set(),
                None if deadline is None else max(deadline - time.monotonic(), 0),
            ) and (self.spool.acked_seq >= target)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> Pipeline:
        targets = [self._write_loop] + ([self._ship_loop] if self.ship else [])
        for target in targets:
            thread = threading.Thread(target=target, name=f"shipper-{target.__name__.strip('_')}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def close(self, timeout: float = 10.0) -> bool:
        """Make everything submitted durable, try to ship it for up to `timeout` seconds, then
        stop; whether everything was shipped. What was not stays in the spool for the next start."""
        if self._closed:
            return self.spool.pending == 0
        self._closed = True
        deadline = time.monotonic() + timeout
        shipped = self.flush(timeout) if self.ship and self._threads else False
        self._queue.put(_STOP)
        self._stopping.set()
        self._wake.set()
        with self._acked:
            self._acked.notify_all()
        for thread in self._threads:
            # The writer drains the queue whatever the time; the shipper may be waiting on an answer.
            thread.join(None if thread.name.endswith("write_loop") else max(deadline - time.monotonic(), 1.0))
        self.sender.close()
        self.spool.close()
        return shipped

    def __enter__(self) -> Pipeline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writer -------------------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            group = [self._queue.get()]
            while len(group) < 4 * self.batch_size:
                try:
                    group.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in group)
            self._write_group([item for item in group if item is not _STOP])
            if stop:
                return

    def _write_group(self, group: list[Any]) -> None:
        tickets = [item for item in group if isinstance(item, _Ticket)]
        lines = self._encode(group)
        taken = 0
        try:
            taken = self.spool.append(lines) if lines else 0
        except SpoolFull as exc:
            log.warning("%s", exc)
            self.metrics.dropped.inc(len(lines) - sum(len(t.records) for t in tickets))
        except Exception:
            log.exception("spool %s: cannot write %d records", self.spool.directory, len(lines))
            self.metrics.dropped.inc(len(lines))
        for ticket in tickets:
            ticket.taken = len(ticket.records) if taken else 0
            ticket.seq = self.spool.next_seq
            ticket.done.set()
        if self.spool.pending >= self.batch_size:
            self._wake.set()

    def _encode(self, group: list[Any]) -> list[bytes]:
        encode = msgspec.json.encode
        lines = []
        for item in group:
            for record in item.records if isinstance(item, _Ticket) else (item,):
                try:
                    lines.append(encode(record))
                except (TypeError, ValueError, OverflowError) as exc:
                    self._drop(1, f"a record cannot be encoded as JSON ({exc})")
        return lines

    def _drop(self, count: int, why: str) -> None:
        log.warning("shipper: dropped %d record(s): %s", count, why)
        self.metrics.dropped.inc(count)

    # --- shipper ------------------------------------------------------------------------

    def _ship_loop(self) -> None:
        attempt = 0
        limit = self.batch_size
        while not self._stopping.is_set():
            try:
                batch = self.spool.read(limit)
                if not batch:
                    self._idle()
                    continue
                outcome = self._ship(batch)
            except SpoolClosed:
                return
            except Exception:  # a bug or a disk error must not end shipping for good
                log.exception("shipper: unexpected error")
                outcome = BACK_OFF
            if outcome is None:  # delivered
                attempt, limit = 0, self.batch_size
                if len(batch) < self.batch_size:
                    self._idle()
            elif outcome == SPLIT:
                limit = max(len(batch) // 2, 1)
            elif outcome == HALT:
                return
            else:
                self.metrics.failed.inc()
                wait = outcome if outcome >= 0 else backoff_delay(attempt, base=self.backoff_base, cap=self.backoff_cap)
                attempt += 1
                self._stopping.wait(wait)

    def _idle(self) -> None:
        self._wake.wait(self.flush_interval)
        self._wake.clear()

    def _ship(self, batch: SpoolBatch) -> float | None:
        """POST one batch: None when delivered (and acknowledged), SPLIT to retry it smaller,
        HALT to stop shipping, else seconds to wait before retrying (BACK_OFF: the backoff's)."""
        try:
            answer = self.sender.post(batch.body())
        except (OSError, http.client.HTTPException) as exc:
            log.warning("shipper: cannot reach %s: %s", self.sender.url, exc)
            return BACK_OFF
        if answer.status in {200, 207}:
            self._delivered(batch, answer)
            return None
        detail = answer.body[:300].decode("utf-8", errors="replace")
        if answer.status in FATAL_STATUSES:
            self.halted = f"HTTP {answer.status} from {self.sender.url}: {detail}"
            log.error(
                "shipper: the collector key was refused (%s); shipping STOPPED, %d records kept in %s",
                self.halted,
                self.spool.pending,
                self.spool.directory,
            )
            with self._acked:
                self._acked.notify_all()
            return HALT
        if answer.status == 413:
            return self._too_large(batch)
        log.warning("shipper: HTTP %d from %s: %s", answer.status, self.sender.url, detail)
        retry_after = retry_after_seconds(answer.headers.get("retry-after"))
        return retry_after if retry_after is not None else BACK_OFF

    def _too_large(self, batch: SpoolBatch) -> float | None:
        if len(batch) > 1:
            return SPLIT
        log.error("shipper: a record of %d bytes is over the API's size limit; dropped", len(batch.records[0]))
        self.metrics.dropped.inc()
        self._ack(batch)
        return None

    def _delivered(self, batch: SpoolBatch, answer: Answer) -> None:
        try:
            result = msgspec.json.decode(answer.body)
            rejected = result.get("rejected") or []
        except (msgspec.DecodeError, AttributeError):
            rejected = []
        if rejected:
            first = rejected[0]
            log.warning(
                "shipper: the platform refused %d of %d records (kept as rejections); first: %s %s",
                len(rejected),
                len(batch),
                first.get("record_id"),
                first.get("errors"),
            )
        if self.on_acked is not None:  # before the spool's ack: flush() returns once it was told
            try:
                self.on_acked(batch.records)
            except Exception:  # never costs shipping
                log.exception("shipper: the acknowledged batch's observer failed")
        self._ack(batch)
        self.metrics.shipped.inc(len(batch))

    def _ack(self, batch: SpoolBatch) -> None:
        self.spool.ack(batch)
        with self._acked:
            self._acked.notify_all()

    def _oldest_age(self) -> float:
        try:
            ts = self.spool.oldest_ts()
        except OSError:
            return 0.0
        return max((datetime.now(UTC) - ts).total_seconds(), 0.0) if ts is not None else 0.0


# --- command line -------------------------------------------------------------------------
